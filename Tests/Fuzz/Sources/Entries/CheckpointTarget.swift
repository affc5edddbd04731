import SnapSyncModel
@testable import SnapSyncStore

/// Checkpoint files through `CheckpointFile.decode`, which reads the header record, the snapshot
/// record (`SnapshotDecoding`), the history records (`WriteRecord`), and the optional TTL and
/// resume base records.
///
/// Input: a checkpoint file; it is run as it is and with its checksums repaired. Laws: refusal
/// is `.corrupt` naming the file and an offset inside it; an accepted file re-encodes to its
/// bytes, its snapshot and resume base keep their invariants, and its history is the versions just before and up
/// to its version, oldest first (so never a version 0 or a wrap past 2^64 - 1).
enum CheckpointTarget {
    static let path = "fuzz/ckpt-0000000000000001.snap"

    static func run(_ input: [UInt8]) throws(LawViolation) {
        try decode(input)
        var repaired = input
        ChecksumRepair.checkpoint(&repaired)
        if repaired != input { try decode(repaired) }
    }

    static func decode(_ bytes: [UInt8]) throws(LawViolation) {
        let file: CheckpointFile
        do {
            file = try CheckpointFile.decode(bytes, path: path)
        } catch {
            guard case .corrupt(let p, let offset, let reason) = error, p == path, offset >= 0,
                offset <= bytes.count, !reason.isEmpty
            else {
                throw LawViolation(description: "a checkpoint was refused with \(error), not as corrupt inside the file")
            }
            return
        }
        try WireTarget.invariants(file.snapshot, "a checkpoint's snapshot")
        let versions = file.history.map(\.version)
        let count = UInt64(versions.count)
        try law(
            count == 0 || (file.version >= count && versions.enumerated().allSatisfy { $1 == file.version - count + 1 + UInt64($0) }),
            "checkpoint of \(file.room) at version \(file.version) accepted with history versions \(versions.prefix(4))...")
        if let base = file.base { try WireTarget.invariants(base, "a checkpoint's resume base") }
        let encoded = CheckpointFile.encode(
            room: file.room, epoch: file.epoch, version: file.version,
            snapshot: file.snapshot, history: file.history, ttl: file.ttl, chain: file.chain, base: file.base)
        try law(encoded == bytes, "an accepted \(bytes.count)-byte checkpoint re-encodes to \(encoded.count) other bytes")
    }
}
