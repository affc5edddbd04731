internal import Crypto

/// The epoch of a room's incarnation in cluster mode (Protocol/CLUSTER.md, "Epochs"): derived,
/// never stored, so that every node computes the same one without a record, and a room nobody
/// wrote can be joined without a quorum.
///
/// The first 8 bytes, big-endian, of SHA-256 over
/// `"snapsync-epoch\0" + salt + "\0" + room UTF-8 + "\0" + decimal(sequence)`, 0 mapped to 1.
/// The salt, the first message of the rooms stream's `snapsync.salt` (random, stored in the
/// stream), makes a room's epochs differ when the stream is made again (a new cluster, or its
/// stream deleted), so a client holding an old incarnation never mistakes a new one for it;
/// `sequence` (0, or the sequence of the tombstone that ended the previous incarnation) makes
/// each incarnation's differ.
package enum RoomEpoch {
    /// - Complexity: O(length of the room name).
    package static func derive(salt: String, room: String, after sequence: UInt64) -> UInt64 {
        var input: [UInt8] = Array("snapsync-epoch".utf8)
        input.append(0)
        input.append(contentsOf: salt.utf8)
        input.append(0)
        input.append(contentsOf: room.utf8)
        input.append(0)
        input.append(contentsOf: String(sequence).utf8)
        let digest = Array(SHA256.hash(data: input))
        var epoch: UInt64 = 0
        for byte in digest[0..<8] { epoch = epoch << 8 | UInt64(byte) }
        return epoch == 0 ? 1 : epoch
    }
}
