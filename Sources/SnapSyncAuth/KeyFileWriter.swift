public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes key files for `snapsyncd keygen`: a new file, or one more key appended to an existing
/// one, whose other members are kept as they are. The result is checked as a key file
/// (`AuthKeySet.load`) before it replaces the old one, and is written to a temporary file
/// created with mode 0600 (it holds private keys) and renamed over the target, so a reader
/// (a daemon reloading on SIGHUP) sees the old file or the new one, never half of one.
public enum KeyFileWriter {
    /// The JSON text of a key file holding `keys`.
    public static func render(_ keys: [JSONWebKey]) throws(AuthKeyFileError) -> Data {
        do {
            return try render(object: ["keys": keys.map(object)])
        } catch {
            throw AuthKeyFileError(path: "<memory>", reason: "cannot be encoded (\(error))")
        }
    }

    /// Adds `key` to the key file at `path` (created if missing).
    /// - Throws: if the file exists and is not a key file, already has `key.kid`, or cannot be written.
    public static func append(_ key: JSONWebKey, to path: String) async throws(AuthKeyFileError) {
        try await append([(key, path)])
    }

    /// Adds each key to its file. Every file is checked before any is written, so a refusal
    /// (a kid already in the second file, say) leaves all of them as they were.
    public static func append(_ entries: [(key: JSONWebKey, path: String)]) async throws(AuthKeyFileError) {
        var prepared: [(data: Data, path: String)] = []
        for (key, path) in entries {
            prepared.append((try await contents(of: path, adding: key), path))
        }
        for (data, path) in prepared { try writeAtomically(data, to: path) }
    }

    /// The text of the key file at `path` with `key` added, checked as a key file.
    private static func contents(of path: String, adding key: JSONWebKey) async throws(AuthKeyFileError) -> Data {
        func refuse(_ reason: String) -> AuthKeyFileError { AuthKeyFileError(path: path, reason: reason) }
        var root: [String: Any] = ["keys": [Any]()]
        if FileManager.default.fileExists(atPath: path) {
            let data: Data
            do {
                data = try KeyFileReader.contents(of: path)
            } catch {
                throw refuse("cannot be read (\(error))")
            }
            guard let existing = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                existing["keys"] is [Any]
            else { throw refuse("is not a key file (a JSON object with a keys array)") }
            root = existing
        }
        var keys = root["keys"] as? [Any] ?? []
        if keys.contains(where: { ($0 as? [String: Any])?["kid"] as? String == key.kid }) {
            throw refuse("already has a key with kid \(quote(key.kid))")
        }
        let data: Data
        do {
            keys.append(try object(key))
            root["keys"] = keys
            data = try render(object: root)
        } catch {
            throw refuse("cannot be encoded (\(error))")
        }
        _ = try await AuthKeySet.load(jwks: data, source: path)
        return data
    }

    private static func object(_ key: JSONWebKey) throws -> Any {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(key))
    }

    private static func render(object: Any) throws -> Data {
        var data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        data.append(UInt8(ascii: "\n"))
        return data
    }

    private static func writeAtomically(_ data: Data, to path: String) throws(AuthKeyFileError) {
        func refuse(_ what: String) -> AuthKeyFileError {
            AuthKeyFileError(path: path, reason: "\(what) failed: \(String(cString: strerror(errno)))")
        }
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw refuse("creating \(temporary)") }
        var written = 0
        while written < data.count {
            let n = data.withUnsafeBytes { write(fd, $0.baseAddress! + written, data.count - written) }
            guard n > 0 else {
                let error = refuse("writing \(temporary)")
                close(fd)
                unlink(temporary)
                throw error
            }
            written += n
        }
        guard fsync(fd) == 0 else {
            let error = refuse("fsync of \(temporary)")
            close(fd)
            unlink(temporary)
            throw error
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let error = refuse("renaming \(temporary) to it")
            unlink(temporary)
            throw error
        }
    }
}
