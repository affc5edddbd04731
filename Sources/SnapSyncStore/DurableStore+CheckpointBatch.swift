internal import Logging

#if canImport(Glibc)
    internal import Glibc
#endif

// Checkpoint files written a batch at a time: the maintenance's checkpoints of the rooms that
// pin a closed segment, and the evictions of sleeping rooms (DurableStore+Sleep.swift). Each file
// is written unsynced under a `.tmp` name, the batch is made durable by one syncfs(2) of the
// data directory's filesystem, the files are renamed into place and the directory is fsynced
// once (so a MANIFEST lists them only once they exist, rule 1 of docs/persistence.md,
// "MANIFEST"). An fsync per file cost a journal commit each (1–3 ms on this
// machine's disk) and two per checkpoint with the directory's: 20,000 small rooms due at one
// segment switch held the loop for 15 s. A batch also stops writing new files once its time
// budget (`StoreOptions.checkpointBatchDuration`, or the daemon's for an eviction) is spent;
// the rooms left are due again at the next tick. The budget is read on `batchClock`, so that a
// test can spend it without a slow disk, and a test that needs every room in one batch gives
// none.

extension DurableStore {
    /// A room of a batch: its image, and the checkpoint file written for it (nil when it needed
    /// none) with its size.
    struct StagedCheckpoint {
        var image: RoomImage
        var file: String?
        var bytes: Int
    }

    /// Writes the checkpoint files of `images`, in their order, and makes them durable and in
    /// place. An image for which `needsNoFile` holds gets none. The next image is not asked for
    /// (so not built) once `budget` has passed on `batchClock` since the call (never, when nil)
    /// or `maxBytes` are written, after at least one file, nor after a full disk (logged with
    /// `purpose`).
    /// - Returns: the rooms of the batch, in order: every image read but the one the disk had
    ///   no room for.
    /// - Throws: fatal errors only.
    /// - Complexity: O(bytes written), one syncfs, one rename per file, one directory fsync.
    func writeCheckpointBatch(
        _ images: some Sequence<RoomImage>, within budget: Duration?, maxBytes: Int,
        purpose: String, needsNoFile: (RoomImage) -> Bool = { _ in false }
    ) throws(StoreError) -> [StagedCheckpoint] {
        let deadline = budget.map { batchClock() + $0 }
        var batch: [StagedCheckpoint] = []
        var written = 0
        var files = 0
        var logPrepared = false
        var next = images.makeIterator()
        func timeLeft() -> Bool { deadline.map { batchClock() < $0 } ?? true }
        while files == 0 || (written < maxBytes && timeLeft()), let image = next.next() {
            if needsNoFile(image) {
                batch.append(StagedCheckpoint(image: image, file: nil, bytes: 0))
                continue
            }
            if !logPrepared {
                try prepareLogForCheckpoint()
                logPrepared = true
            }
            let (bytes, sequence) = encodeCheckpoint(image)
            let name = CheckpointFile.fileName(sequence)
            do {
                try Self.writeUnsynced(bytes, path: path(name) + ".tmp", sync: Self.syncfs == nil)
            } catch {
                guard case .noSpace = error else { throw error }
                logger.warning("store: no space to checkpoint room \(image.room)\(purpose.isEmpty ? "" : " " + purpose): \(error); will retry")
                break
            }
            batch.append(StagedCheckpoint(image: image, file: name, bytes: bytes.count))
            written += bytes.count
            files += 1
        }
        if files > 0 {
            try Self.syncFilesystem(of: directory)
            for case let name? in batch.lazy.map(\.file) { try Directory.rename(path(name) + ".tmp", path(name)) }
            try Directory.syncEntries(directory)
        }
        return batch
    }

    /// `bytes` written to a new file at `path` and closed, fsynced only when `sync`.
    private static func writeUnsynced(_ bytes: [UInt8], path: String, sync: Bool) throws(StoreError) {
        do {
            let file = try PosixFile(path: path, flags: O_WRONLY | O_CREAT | O_TRUNC)
            defer { file.close() }
            try file.write(bytes, at: 0)
            if sync { try file.syncAll() }
        } catch {
            try? Directory.remove(path)
            throw error
        }
    }

    /// syncfs(2) of the filesystem holding `directory`: every file written on it is durable
    /// (errors of writeback are reported since Linux 5.8). A no-op where syncfs is missing
    /// (each file was fsynced then).
    private static func syncFilesystem(of directory: String) throws(StoreError) {
        guard let syncfs else { return }
        let dir = try PosixFile(path: directory, flags: O_RDONLY | O_DIRECTORY)
        defer { dir.close() }
        guard syncfs(dir.fd) == 0 else { throw StoreError.fsyncFailed(path: directory, errno: errno) }
    }

    /// glibc's syncfs, which Swift's Glibc module does not declare (it is a GNU extension).
    private static let syncfs: (@convention(c) (Int32) -> Int32)? = {
        guard let symbol = dlsym(nil, "syncfs") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
    }()
}
