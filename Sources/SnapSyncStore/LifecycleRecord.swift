internal import SnapSyncWire

/// The records of a room's life other than its writes (docs/persistence.md, "Room ends and
/// time-to-live"): a tombstone, logged when a room is dropped or expires, so that recovery
/// never brings it back; and a TTL, logged when a room's time-to-live is set and kept in the
/// room's checkpoint, so that the store alone knows every room's TTL.
enum LifecycleRecord: Hashable, Sendable {
    /// kind 0x04: string room, varint epoch, varint version. The incarnation (room, epoch)
    /// ended at `version`: every record and checkpoint of it is void.
    case tombstone(room: String, epoch: UInt64, version: UInt64)
    /// kind 0x05: string room, varint epoch, varint serial, varint seconds. The room's TTL as
    /// set by its `serial`-th SET_TTL (1, 2, ...: a record replaces a TTL of a lower serial, so
    /// an older record replayed after a newer checkpoint changes nothing); `seconds` 0 is
    /// "never expires".
    case ttl(room: String, epoch: UInt64, serial: UInt64, seconds: UInt64)

    var room: String {
        switch self {
        case .tombstone(let room, _, _), .ttl(let room, _, _, _): room
        }
    }

    func encodePayload(into out: inout [UInt8]) {
        switch self {
        case .tombstone(let room, let epoch, let version):
            out.append(PayloadKind.tombstone.rawValue)
            out.appendString(room)
            out.appendVarint(epoch)
            out.appendVarint(version)
        case .ttl(let room, let epoch, let serial, let seconds):
            out.append(PayloadKind.ttl.rawValue)
            out.appendString(room)
            out.appendVarint(epoch)
            out.appendVarint(serial)
            out.appendVarint(seconds)
        }
    }

    /// Decodes the payload `bytes[range]`, whose kind byte is 0x04 or 0x05.
    init(payload bytes: [UInt8], range: Range<Int>) throws(FieldReader.Failure) {
        self = try bytes.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> LifecycleRecord in
            var r = FieldReader(p, from: range.lowerBound, to: range.upperBound)
            let kind = try r.u8("kind")
            let record: LifecycleRecord
            switch PayloadKind(rawValue: kind) {
            case .tombstone:
                let room = try r.string("room")
                let epoch = try r.varint("epoch")
                record = .tombstone(room: room, epoch: epoch, version: try r.varint("version"))
            case .ttl:
                let room = try r.string("room")
                let epoch = try r.varint("epoch")
                let serial = try r.varint("serial")
                record = .ttl(room: room, epoch: epoch, serial: serial, seconds: try r.varint("seconds"))
            default:
                throw FieldReader.Failure(what: "record kind \(kind) is not a tombstone or a TTL")
            }
            guard r.isAtEnd else { throw FieldReader.Failure(what: "\(r.remaining) bytes left after the record's fields") }
            return record
        }
    }

    /// The kind byte of a payload, without decoding it.
    static func kind(of bytes: [UInt8], payload: Range<Int>) -> PayloadKind? {
        payload.isEmpty ? nil : PayloadKind(rawValue: bytes[payload.lowerBound])
    }
}
