import Crypto

/// A room's chain value: a hash of everything the room went through in its incarnation, so that
/// two replicas at the same (epoch, version) that hold different states can tell.
///
/// ```
/// chain(epoch, 0) = SHA-256( "snapsync-chain" 0x00 u64-big-endian(epoch) )
/// chain(epoch, v) = SHA-256( chain(epoch, v - 1) ‖ the DIFF frame of version v )
/// ```
///
/// The DIFF frame is the whole frame members receive (PROTOCOL.md §11.13), its 4-byte length
/// prefix included: the bytes the cluster's records carry (Protocol/CLUSTER.md §3). 32 bytes, no
/// truncation: a chain is compared, never searched, so its size costs only the record's bytes.
public struct RoomChain: Hashable, Sendable, CustomStringConvertible {
    /// The 32 bytes, as four big-endian words (no heap allocation per value).
    private var words: (UInt64, UInt64, UInt64, UInt64)

    public static let byteCount = 32

    /// 32 zero bytes: what a record names as the chain before it when its proposer did not know
    /// the room's chain (a room loaded from a checkpoint saved before checkpoints carried one).
    /// Replicas then take the record's chain after as the room's, without comparing.
    public static let unknown = RoomChain(words: (0, 0, 0, 0))

    private init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    /// The chain of an incarnation before its first write.
    /// - Complexity: O(1), one SHA-256 block.
    public static func start(epoch: UInt64) -> RoomChain {
        var input = Array("snapsync-chain".utf8)
        input.append(0)
        input.appendBigEndian(epoch)
        return RoomChain(digest: SHA256.hash(data: input))
    }

    /// The chain after the version whose DIFF frame is `frame`.
    /// - Complexity: O(frame).
    public func next(frame: UnsafeRawBufferPointer) -> RoomChain {
        var hasher = SHA256()
        withUnsafeBytes(of: words) { hasher.update(bufferPointer: $0) }
        hasher.update(bufferPointer: frame)
        return RoomChain(digest: hasher.finalize())
    }

    /// `next(frame:)` of a frame held in an array.
    public func next(frame: [UInt8]) -> RoomChain {
        frame.withUnsafeBytes { next(frame: $0) }
    }

    /// The chain whose bytes are `bytes` (exactly `byteCount` of them).
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        self.words = words
    }

    private init(digest: SHA256.Digest) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        digest.withUnsafeBytes { source in
            withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: source) }
        }
        self.words = words
    }

    /// The 32 bytes, in order.
    public var bytes: [UInt8] { withUnsafeBytes(of: words) { Array($0) } }

    public static func == (a: RoomChain, b: RoomChain) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: words) { hasher.combine(bytes: $0) }
    }

    /// Lowercase hex, as logs and errors name a chain.
    public var description: String {
        bytes.map { byte in
            let digits = Array("0123456789abcdef")
            return "\(digits[Int(byte >> 4)])\(digits[Int(byte & 0x0f)])"
        }.joined()
    }
}

extension Array where Element == UInt8 {
    /// Appends the chain's 32 bytes.
    package mutating func appendChain(_ chain: RoomChain) {
        append(contentsOf: chain.bytes)
    }
}

extension RoomChain {
    /// The version 3 frame of the DIFF whose version 1 and 2 frame is `frame`, with `chain`,
    /// the room's chain after it: the same bytes, the length prefix 32 more, the chain at the
    /// end (PROTOCOL.md §11.13).
    /// - Complexity: O(frame), one copy.
    package static func chainedDiffFrame(_ frame: UnsafeRawBufferPointer, chain: RoomChain) -> [UInt8] {
        precondition(frame.count >= 5, "not a DIFF frame")
        var out = [UInt8]()
        out.reserveCapacity(frame.count + byteCount)
        let length = UInt32(frame.count - 4 + byteCount)
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: length >> UInt32(shift))) }
        out.append(contentsOf: frame[4...])
        out.appendChain(chain)
        return out
    }
}
