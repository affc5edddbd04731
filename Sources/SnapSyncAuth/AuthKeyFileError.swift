/// Why a key file was not loaded (and, on a reload, why the keys in use were kept).
public struct AuthKeyFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file, or `<memory>` for a key set given as bytes.
    public let path: String
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "auth key file \(path): \(reason)" }
}
