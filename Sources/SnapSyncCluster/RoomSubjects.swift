// The names cluster mode gives a room in NATS (Protocol/CLUSTER.md, "Subjects"). A room name is
// up to 128 bytes of any UTF-8, which a subject token or a key may not hold (dots, spaces,
// wildcards), so both use the lowercase hex of its UTF-8 bytes.

enum RoomSubjects {
    static let roomsStream = "snapsync-rooms"
    static let checkpointsStream = "KV_snapsync-checkpoints"
    static let checkpointsBucket = "snapsync-checkpoints"
    /// The rooms stream's subject whose first message is the salt of every epoch.
    static let saltSubject = "snapsync.salt"

    /// `snapsync.room.<hex>`: the room's records.
    static func subject(room: String) -> String { "snapsync.room." + key(room: room) }

    /// The room's key in the checkpoints bucket: hex of its name.
    static func key(room: String) -> String { hex(Array(room.utf8)) }

    /// `$KV.snapsync-checkpoints.<key>`: the subject a checkpoint is put to.
    static func checkpointSubject(room: String) -> String { "$KV.\(checkpointsBucket).\(key(room: room))" }

    /// A write's `Nats-Msg-Id`: `<hex room>.<hex write id>.<expected sequence>`. JetStream
    /// de-duplicates message ids across the whole stream, but write ids are the room's
    /// (PROTOCOL.md: a write id is remembered per room), so the room is part of the id. The
    /// expectation is too: a repeat of one proposal (a retry after a timeout, or through another
    /// node at the same position) is de-duplicated, but a proposal made again after the room
    /// moved must not be answered with an earlier record that replicas voided
    /// (Protocol/CLUSTER.md, "Void records").
    static func messageID(room: String, writeID: [UInt8], expected: UInt64) -> String {
        key(room: room) + "." + hex(writeID) + "." + String(expected)
    }

    /// - Complexity: O(n).
    static func hex(_ bytes: [UInt8]) -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
