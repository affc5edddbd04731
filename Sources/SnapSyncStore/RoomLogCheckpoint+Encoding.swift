internal import SnapSyncWire

// A room's checkpoint as cluster mode stores it, as one value of a key-value bucket
// (Protocol/CLUSTER.md, "Checkpoints"):
//
//   "SNAPCHN1"               8 bytes, a value that carries the room's chain
//   chain                    32 bytes, the room's chain at the checkpoint's version
//   varint sequence          the room subject's sequence the checkpoint covers
//   checkpoint file bytes    exactly a checkpoint file of docs/persistence.md ("SNAPCKP1", the
//                            header record, the snapshot, the history records; no TTL record),
//                            its header of kind 0x09 with the chain before the history when the
//                            image's `chain` is known, else 0x02
//
// A value saved before checkpoints carried the chain is the last two fields alone; it cannot be
// taken for the new layout (its first byte would be 0x53 only for sequence 83, and then its
// second is the file's "S", not "N"). The file format is reused as is, so its checksums and
// digest check a value read back.

extension RoomLogCheckpoint {
    private static let chainMagic = Array("SNAPCHN1".utf8)

    /// The value's bytes.
    /// - Complexity: O(size of the snapshot + history), as `CheckpointFile.encode`.
    package func encode() -> [UInt8] {
        var out: [UInt8] = []
        if let chain {
            out.append(contentsOf: Self.chainMagic)
            out.appendChain(chain)
        }
        out.appendVarint(sequence)
        out.append(
            contentsOf: CheckpointFile.encode(
                room: image.room, epoch: image.epoch, version: image.version, snapshot: image.snapshot, history: history,
                chain: image.chain))
        return out
    }

    /// The same checkpoint without its `count` oldest history records, its chain before the
    /// history advanced over them (`HistoryChain`).
    /// - Complexity: O(bytes of the records dropped), one SHA-256 each.
    package func droppingOldest(_ count: Int) -> RoomLogCheckpoint {
        let kept = HistoryChain.suffix(history, history.count - count, chain: image.chain)
        var image = image
        image.chain = kept.chain
        image.diffFrames = kept.history.map(\.diffFrame)
        return RoomLogCheckpoint(image: image, history: kept.history, sequence: sequence, chain: chain)
    }

    /// Decodes a value read from the bucket under `key` (named in errors). The image's
    /// `diffFrames` are the history's DIFF frames. Any damage is `.corrupt`.
    package init(value: [UInt8], key: String) throws(StoreError) {
        let path = "checkpoint \(key)"
        let (sequence, chain, fileStart): (UInt64, RoomChain?, Int)
        do {
            (sequence, chain, fileStart) = try value.withUnsafeBufferPointer {
                (p) throws(FieldReader.Failure) -> (UInt64, RoomChain?, Int) in
                var r = FieldReader(p, from: 0, to: p.count)
                var chain: RoomChain?
                if value.starts(with: Self.chainMagic) {
                    _ = try r.raw(Self.chainMagic.count, "magic")
                    chain = try r.chain("chain")
                }
                let sequence = try r.varint("sequence")
                return (sequence, chain, p.count - r.remaining)
            }
        } catch {
            throw StoreError.corrupt(path: path, offset: 0, reason: error.what)
        }
        let file = try CheckpointFile.decode(Array(value[fileStart...]), path: path)
        self.init(
            image: RoomImage(
                room: file.room, epoch: file.epoch, version: file.version, snapshot: file.snapshot,
                diffFrames: file.history.map(\.diffFrame), chain: file.chain),
            history: file.history, sequence: sequence, chain: chain)
    }
}
