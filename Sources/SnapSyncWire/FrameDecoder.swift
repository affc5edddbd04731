/// Cuts a byte stream into frames and decodes each into a `Message` (PROTOCOL.md §1).
///
/// Incremental: `append` whatever arrived from the socket, then call `nextMessage()` until it
/// returns `nil`. The contract, after swift-nio's decoders:
/// - `nil` means "need more bytes": nothing was consumed.
/// - The 4-byte length is checked against `limits.maxFrameBytes` (and against 0) as soon as it
///   is buffered, before any of the body is waited for or allocated.
/// - A frame-level error (`frameTooLarge`, zero length) consumes nothing and repeats on every
///   later call: the stream cannot be resynchronised, and the caller closes the connection.
/// - An error inside a whole frame consumes that frame. Structural errors still end the
///   connection (ERROR, then close), but a content error with `requestID` set (see `WireError`)
///   may be answered with REJECT and the stream read on.
///
/// Complexity: O(bytes) per frame; buffered bytes are compacted lazily, so `append` plus
/// `nextMessage` cost amortized O(1) per byte.
public struct FrameDecoder: Sendable {
    /// SnapshotLimits applied to every frame decoded from now on. A client starts with the defaults and
    /// adopts the server's after WELCOME (`WireLimits(welcome:)`).
    public var limits: WireLimits
    /// Which peer's messages this decoder accepts: a server decodes `.client` messages, a client
    /// `.server` ones; any other type byte is `unknown_message_type`. `.either` accepts all
    /// (tools, tests).
    public var accepting: Sender
    /// The connection's protocol version (§8.2): a server sets it from the WELCOME it sends, a
    /// client from the WELCOME it receives. Version 1 knows no REPLACE_SECTION, no opcodes
    /// 0x17/0x18 and no `levels` part. Until then, the current version (HELLO and WELCOME read
    /// the same in every version).
    public var version: UInt64 = ProtocolVersion.unchained

    private var buffer: [UInt8] = []
    private var readIndex = 0

    public init(limits: WireLimits = .default, accepting: Sender = .either) {
        self.limits = limits
        self.accepting = accepting
    }

    /// Bytes received but not yet consumed as frames.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Buffers bytes read from the stream. O(bytes.count) amortized.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, or `nil` (consuming nothing) when no whole frame is buffered yet.
    public mutating func nextMessage() throws(WireError) -> Message? {
        let cutter = FrameCutter(limits: limits)
        let start = readIndex
        // withUnsafeBufferPointer, not withUnsafeBytes: only the former keeps the typed throw.
        let frameLength = try buffer.withUnsafeBufferPointer { (all) throws(WireError) -> Int? in
            try cutter.nextFrame(in: UnsafeRawBufferPointer(all)[start...])?.count
        }
        guard let frameLength else { return nil }
        // Consume first: an error inside a whole frame consumes it (see the type's contract).
        readIndex = start + frameLength
        defer { compact() }
        let limits = limits, accepting = accepting, version = version
        return try buffer.withUnsafeBufferPointer { (all) throws(WireError) -> Message in
            try Self.decodeBody(UnsafeBufferPointer(rebasing: all[start + 4..<start + frameLength]), limits: limits, accepting: accepting, version: version)
        }
    }

    /// Decodes exactly one whole frame (length prefix included). Anything but one complete frame
    /// is `malformed_frame`: fewer bytes than the length says ("truncated frame"), or more
    /// ("trailing bytes").
    public static func decode(
        frame: [UInt8], limits: WireLimits = .default, accepting: Sender = .either, version: UInt64 = ProtocolVersion.unchained
    ) throws(WireError) -> Message {
        try frame.withUnsafeBufferPointer { (all) throws(WireError) -> Message in
            try decode(frame: UnsafeRawBufferPointer(all), limits: limits, accepting: accepting, version: version)
        }
    }

    /// Decodes exactly one whole frame in place, e.g. one `FrameCutter` cut out of a read buffer;
    /// the same rules as `decode(frame:)` with an array.
    /// - Complexity: O(frame bytes); nothing is copied but the decoded fields.
    public static func decode(
        frame all: UnsafeRawBufferPointer, limits: WireLimits = .default, accepting: Sender = .either, version: UInt64 = ProtocolVersion.unchained
    ) throws(WireError) -> Message {
        guard all.count >= 4 else {
            throw WireError.malformed("truncated frame: \(all.count) bytes, the length prefix alone is 4")
        }
        guard let length = try FrameCutter(limits: limits).bodyLength(in: all) else {
            preconditionFailure("four bytes hold a length prefix")
        }
        guard all.count - 4 >= length else {
            throw WireError.malformed("truncated frame: body length \(length), but only \(all.count - 4) bytes follow")
        }
        guard all.count - 4 == length else {
            throw WireError.malformed("\(all.count - 4 - length) trailing bytes after a frame of body length \(length)")
        }
        return try decodeBody(
            UnsafeRawBufferPointer(rebasing: all[4...]).assumingMemoryBound(to: UInt8.self), limits: limits, accepting: accepting, version: version)
    }

    /// Decodes one body (type byte + fields), without the length prefix.
    public static func decode(
        body: [UInt8], limits: WireLimits = .default, accepting: Sender = .either, version: UInt64 = ProtocolVersion.unchained
    ) throws(WireError) -> Message {
        try body.withUnsafeBufferPointer { (all) throws(WireError) -> Message in
            try decodeBody(all, limits: limits, accepting: accepting, version: version)
        }
    }

    // MARK: Internals

    static func decodeBody(_ body: UnsafeBufferPointer<UInt8>, limits: WireLimits, accepting: Sender, version: UInt64) throws(WireError) -> Message {
        let typeByte = body[0]
        guard let type = MessageType(rawValue: typeByte), type.exists(inVersion: version) else {
            throw WireError(
                .unknownMessageType, "unknown message type 0x\(hex(typeByte))\(MessageType(rawValue: typeByte) == nil ? "" : " in protocol version \(version)")"
            )
        }
        guard accepting == .either || type.sentBy == .either || type.sentBy == accepting else {
            throw WireError(.unknownMessageType, "\(type.name) (0x\(hex(typeByte))) is sent by the \(type.sentBy == .client ? "client" : "server") only")
        }
        var reader = ByteReader(UnsafeBufferPointer(rebasing: body[1...]), message: type, version: version)
        return try reader.readBody(limits: limits)
    }

    /// Drops consumed bytes once they are at least half the buffer (and not tiny), so each byte
    /// is moved at most once on average; an empty remainder resets for free. Hand-written, not a
    /// `Deque`: frames are decoded where they lie, which needs the bytes contiguous.
    private mutating func compact() {
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        } else if readIndex >= 4096 && readIndex * 2 >= buffer.count {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
    }
}
