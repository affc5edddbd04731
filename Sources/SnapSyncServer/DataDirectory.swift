internal import Glibc

/// The data directory: where durable state will live.
public enum DataDirectory {
    /// The default: `$STATE_DIRECTORY` when systemd set it (`StateDirectory=`; the first entry
    /// if it lists several), else `./data`.
    public static func defaultPath() -> String {
        defaultPath(stateDirectory: getenv("STATE_DIRECTORY").map { String(cString: $0) })
    }

    /// The default for a given `$STATE_DIRECTORY` value (`nil`: not set).
    public static func defaultPath(stateDirectory value: String?) -> String {
        if let value, let first = value.split(separator: ":").first, !first.isEmpty { return String(first) }
        return "./data"
    }

    /// Creates the directory and its missing parents (mode 0700), like `mkdir -p`, and checks
    /// that it is a writable directory.
    public static func prepare(_ path: String) throws(ConfigurationError) {
        guard !path.isEmpty else { throw ConfigurationError(message: "--data-dir must not be empty") }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw ConfigurationError(message: "cannot create data directory \(prefix): \(String(cString: strerror(errno)))")
            }
            prefix += "/"
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw ConfigurationError(message: "data directory \(path) is not a directory")
        }
        guard access(path, W_OK | X_OK) == 0 else {
            throw ConfigurationError(message: "data directory \(path) is not writable: \(String(cString: strerror(errno)))")
        }
    }
}
