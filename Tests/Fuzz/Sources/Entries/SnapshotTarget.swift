import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

/// A snapshot's canonical encoding (PROTOCOL.md §4), read by the two decoders that exist:
/// the store's `SnapshotDecoding.decode` (checkpoints) and the wire's snapshot field (here in a
/// SNAPSHOT body, as a client reads it).
///
/// Input: the encoding. Laws: without limits the two accept the same inputs and build equal
/// snapshots, which keep their invariants and re-encode to the input (so the digest a peer
/// computes is the digest of what was sent); with the default limits, the wire decoder accepts
/// a subset, and refuses a content rule with the SNAPSHOT's request id.
enum SnapshotTarget {
    static let unlimited = WireLimits(maxFrameBytes: .max, model: .unlimited)
    static let requestID: UInt64 = 5

    static func run(_ input: [UInt8]) throws(LawViolation) {
        let store = Result { () throws(FieldReader.Failure) -> RoomSnapshot in
            try SnapshotDecoding.decode(input, range: input.indices)
        }
        // type, request_id, room "", epoch 0, version 0, reason initial, digest (32 bytes), snapshot
        let body = [MessageType.snapshot.rawValue, UInt8(requestID), 0, 0, 0, 0] + [UInt8](repeating: 0, count: 32) + input
        let wire = snapshot(body, limits: unlimited)
        switch (store, wire) {
        case (.success(let s), .success(let w)):
            try law(s == w, "the store and the wire decode one encoding to different snapshots")
            try WireTarget.invariants(s, "a decoded snapshot")
            try law(s.canonicalEncoding == input, "a decoded snapshot re-encodes to other bytes")
            try law(s.canonicalByteCount == input.count, "canonicalByteCount \(s.canonicalByteCount) for \(input.count) bytes")
        case (.failure(let e), .failure):
            try law(!e.what.isEmpty, "a refused snapshot without a reason")
        case (.success, .failure(let e)):
            throw LawViolation(description: "the store accepts a snapshot encoding the wire refuses: \(e)")
        case (.failure(let e), .success):
            throw LawViolation(description: "the wire accepts a snapshot encoding the store refuses: \(e.what)")
        }
        switch snapshot(body, limits: .default) {
        case .success(let limited):
            guard case .success(let w) = wire, w == limited else {
                throw LawViolation(description: "the default limits accept a snapshot that no limits do not")
            }
        case .failure(let e):
            if e.code.rawValue >= 20 {
                try law(e.requestID == requestID, "a content error (\(e.code.name)) in SNAPSHOT without its request id")
            }
        }
    }

    static func snapshot(_ body: [UInt8], limits: WireLimits) -> Result<RoomSnapshot, WireError> {
        let decoded = Result { () throws(WireError) -> Message in
            try FrameDecoder.decode(body: body, limits: limits, accepting: .server)
        }
        return decoded.map { message in
            guard case .snapshot(_, _, _, _, _, _, let snapshot, _) = message else {
                preconditionFailure("a SNAPSHOT body decoded as \(message.type.name)")
            }
            return snapshot
        }
    }
}
