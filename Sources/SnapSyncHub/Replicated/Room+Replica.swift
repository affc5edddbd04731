import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode: the replica changes only here, by the records the room's log delivers,
// whichever node proposed them, so every node's room goes through the same versions.

/// A record the replica cannot apply: the log and the replica disagree (a record of another
/// epoch or out of order, a DIFF that does not decode or apply). The room stops taking writes.
struct ReplicaError: Error, CustomStringConvertible {
    var room: String
    var sequence: UInt64
    var reason: String
    var description: String { "room \(room): the log's record at sequence \(sequence) cannot be applied: \(reason)" }
}

extension Room {
    /// Applies the write `record` (the room's next version in its epoch), as a write applied
    /// here would be: the snapshot, the history (the record's frame as is), the write id with
    /// the record's fingerprint (a record without one, written before fingerprints were kept,
    /// makes any write reusing the id its retry).
    /// - Parameters:
    ///   - prepared: the write's ops, when this node validated it against the room as it is now
    ///     (`propose`), with the snapshot the record's last write leads to for that one (nil for
    ///     the writes before it): then nothing is decoded, and the last write installs the
    ///     result (`install`); the writes before it change nothing unless the room keeps a
    ///     resume base, which needs their undos.
    ///   - chainAfter: the room's chain after this write, as the record's check computed it (nil
    ///     for a record of the kind without chains: the room's own is advanced).
    /// - Returns: the DIFF frame, shared, for the members.
    /// - Complexity: O(1) with `prepared` and no resume base (O(DIFF) with one: `install`); else
    ///   O(frame) to decode plus `RoomSnapshot.apply`'s cost.
    func applyLogged(
        _ record: WriteRecord, sequence: UInt64, prepared: (ops: [SnapshotOperation], result: RoomSnapshot?)?,
        chainAfter: RoomChain? = nil
    ) throws(ReplicaError) -> OutputChunk {
        guard record.epoch == epoch, record.version == version + 1 else {
            throw ReplicaError(
                room: name, sequence: sequence,
                reason: "it is version \(record.version) of epoch \(record.epoch), the replica is at version \(version) of epoch \(epoch)")
        }
        let ops: [SnapshotOperation]
        var undo: SnapshotUndo?
        if let prepared {
            ops = prepared.ops
            if let result = prepared.result {
                undo = install(result, from: ops, frameBytes: record.diffFrame.count)
            } else if resumeBase != nil {
                // Without a base the writes before the record's last change nothing here: the
                // last installs the result of them all. The base needs each one's undo, so each
                // is applied, and the last installs the result over the state they lead to.
                do {
                    undo = try applyToSnapshot(ops)
                } catch {
                    throw ReplicaError(room: name, sequence: sequence, reason: "its DIFF does not apply: \(error)")
                }
            }
        } else {
            let message: Message
            do {
                message = try FrameDecoder.decode(frame: record.diffFrame, limits: limits, accepting: .server)
            } catch {
                throw ReplicaError(room: name, sequence: sequence, reason: "its DIFF frame does not decode: \(error)")
            }
            guard case .diff(let room, let epoch, let version, let decoded, _) = message, room == name, epoch == record.epoch,
                version == record.version
            else {
                throw ReplicaError(room: name, sequence: sequence, reason: "its frame is not this version's DIFF of the room")
            }
            do {
                undo = try applyToSnapshot(decoded)
            } catch {
                throw ReplicaError(room: name, sequence: sequence, reason: "its DIFF does not apply: \(error)")
            }
            ops = decoded
        }
        guard
            case .applied(_, let chunk) = commit(
                version: record.version, writeID: record.writeID, fingerprint: record.fingerprint, frame: record.diffFrame, ops: ops,
                undo: undo, chainAfter: chainAfter)
        else { preconditionFailure("commit applies") }
        return chunk
    }

    /// The writes of the versions in history, oldest first, for a checkpoint: each frame with
    /// the write id that made it and its fingerprint (empty when none, or forgotten).
    /// - Complexity: O(history).
    func historyRecords() -> [WriteRecord] {
        let frames = history.frames(after: historyBaseVersion) ?? []
        var ids: [UInt64: (id: [UInt8], fingerprint: UInt64?)] = [:]
        writeIDs.forEachApplied { id, entry in ids[entry.version] = (id, entry.fingerprint) }
        return frames.enumerated().map { index, frame in
            let version = historyBaseVersion + 1 + UInt64(index)
            return WriteRecord(
                room: name, epoch: epoch, version: version, writeID: ids[version]?.id ?? [], fingerprint: ids[version]?.fingerprint,
                diffFrame: frame.array)
        }
    }
}
