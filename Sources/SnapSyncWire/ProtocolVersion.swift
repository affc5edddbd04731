/// The protocol version this codec's layouts are (PROTOCOL.md §8.2): one place for the daemon
/// that answers HELLO, the client that sends it, and the tools.
public enum ProtocolVersion {
    /// The version PROTOCOL.md describes. A HELLO offers it; a WELCOME names it.
    public static let current: UInt64 = 1
}
