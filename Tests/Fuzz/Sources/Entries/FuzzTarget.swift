// The fuzz targets: each is one function from input bytes to "parsed, and every law held".
//
// Shared by the libFuzzer driver (Tests/Fuzz/Driver, sanitized, scripts/fuzz) and the replay
// tests (Tests/Fuzz/Sources/Replay, part of `swift test`), so that a crash input replays through exactly
// the code that found it. A parser may refuse input only with its typed error; a law that does
// not hold is a `LawViolation` (the driver turns it into a crash, the replay test into a failure);
// anything else — a trap, an out-of-bounds access — crashes both.

public enum FuzzTarget: String, CaseIterable, Sendable {
    /// Frames and messages: the incremental `FrameDecoder` fed in chunks, as a server and as a
    /// client, with the default or tight limits.
    case wire
    /// Log segments: the header check, the record framing reader, `WriteRecord` payloads and the
    /// DIFF frames they hold, replayed over the rooms.
    case log
    /// Checkpoint files: `CheckpointFile.decode`.
    case checkpoint
    /// Canonical snapshot encodings: the store's `SnapshotDecoding` against the wire's
    /// snapshot field, which must agree.
    case snapshot

    /// Runs one input.
    public func run(_ input: [UInt8]) throws(LawViolation) {
        switch self {
        case .wire: try WireTarget.run(input)
        case .log: try LogTarget.run(input)
        case .checkpoint: try CheckpointTarget.run(input)
        case .snapshot: try SnapshotTarget.run(input)
        }
    }
}

/// A law of the parser that an input broke: a bug, as much as a crash.
public struct LawViolation: Error, CustomStringConvertible {
    public var description: String
}

/// Throws `LawViolation(message)` unless `condition` holds.
@inline(__always)
func law(_ condition: Bool, _ message: @autoclosure () -> String) throws(LawViolation) {
    if !condition { throw LawViolation(description: message()) }
}
