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
        do throws(SystemError) {
            for component in path.split(separator: "/") {
                prefix += component
                try Syscall.makeDirectory(prefix, mode: 0o700)
                prefix += "/"
            }
        } catch {
            throw ConfigurationError(message: "cannot create data directory: \(error)")
        }
        guard Syscall.isDirectory(path) else {
            throw ConfigurationError(message: "data directory \(path) is not a directory")
        }
        do {
            try Syscall.checkWritable(path)
        } catch {
            throw ConfigurationError(message: "data directory \(path) is not writable: \(error)")
        }
    }
}
