/// Finds whole frames in bytes that are already in memory, without copying them (PROTOCOL.md §1).
///
/// The one place that reads and checks a frame's length prefix: the daemon cuts frames straight
/// out of its socket read buffer, the client out of NIO's cumulation buffer (its
/// `WireFrameDecoder`), and `FrameDecoder` (a buffering decoder for tools and tests) out of its
/// own buffer, all with this type. A frame it returns is a slice of the caller's
/// bytes, length prefix included, ready for `FrameDecoder.decode(frame:)`.
///
/// The contract, after swift-nio's `ByteToMessageDecoder`:
/// - `nil` means "the next frame has not fully arrived": nothing is consumed.
/// - The length is checked (against 0 and `maxBodyBytes`) as soon as its 4 bytes are there,
///   before anything is waited for or reserved for the body. A failed check throws every time:
///   the stream cannot be resynchronised, and the caller ends the connection.
///
/// - Complexity: O(1) per frame; the body is not looked at.
public struct FrameCutter: Sendable {
    /// The largest body length accepted.
    public var maxBodyBytes: Int
    /// Names the limit in `frame_too_large` messages; nil: "max_frame_bytes N". Kept as given
    /// and only formatted on the error path, so that a cutter costs nothing to make per read.
    public var limitDescription: String?

    /// Cuts frames whose bodies are at most `maxBodyBytes` long; `limitDescription` names that
    /// limit in errors (default: "max_frame_bytes N").
    public init(maxBodyBytes: Int, limitDescription: String? = nil) {
        self.maxBodyBytes = maxBodyBytes
        self.limitDescription = limitDescription
    }

    /// Cuts frames under `limits.maxFrameBytes`.
    public init(limits: WireLimits) {
        self.init(maxBodyBytes: limits.maxFrameBytes)
    }

    /// The body length announced by the length prefix at the start of `bytes`, checked; `nil`
    /// while fewer than 4 bytes are there.
    public func bodyLength(in bytes: UnsafeRawBufferPointer) throws(WireError) -> Int? {
        guard bytes.count >= 4 else { return nil }
        let length = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        guard length >= 1 else {
            throw WireError.malformed("frame body length 0 (at least the type byte is required)")
        }
        guard length <= maxBodyBytes else {
            throw WireError(.frameTooLarge, "frame body length \(length) exceeds \(limitDescription ?? "max_frame_bytes \(maxBodyBytes)")")
        }
        return length
    }

    /// The whole frame at the start of `bytes` (length prefix included, a slice of `bytes`), or
    /// `nil` when it has not fully arrived.
    public func nextFrame(in bytes: UnsafeRawBufferPointer) throws(WireError) -> UnsafeRawBufferPointer? {
        guard let length = try bodyLength(in: bytes), bytes.count - 4 >= length else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes[0..<4 + length])
    }

    /// The whole frame at the start of `bytes` (a slice of it), or `nil` when it has not fully arrived.
    public func nextFrame(in bytes: UnsafeRawBufferPointer.SubSequence) throws(WireError) -> UnsafeRawBufferPointer? {
        try nextFrame(in: UnsafeRawBufferPointer(rebasing: bytes))
    }
}
