internal import Logging

// Start-up: the files in the data directory checked against its MANIFEST (see Manifest.swift
// for the ordering that makes the rules below sound). Nothing is changed on disk here: what to
// remove is returned, and removed only after the new MANIFEST is written.

struct ManifestAudit {
    /// Checkpoint files to load, by sequence number, ascending.
    var checkpoints: [(name: String, sequence: UInt64)] = []
    /// Log segments to replay, ascending.
    var segments: [UInt64] = []
    /// Files a crash left behind after the MANIFEST dropped them: removed once the new
    /// MANIFEST is written.
    var leftovers: [String] = []
    /// The lowest sequence number a new checkpoint may take.
    var nextCheckpoint: UInt64 = 1
    /// The lowest sequence number the next segment may take.
    var nextSegment: UInt64 = 1

    /// Sorts `names` (the directory's entries, `*.tmp` already removed) into what to load.
    ///
    /// - Throws: `.inconsistent` naming the first file that is missing or cannot be accounted for.
    static func check(
        names: [String], manifest: Manifest?, directory: String,
        logger: Logger
    ) throws(StoreError) -> ManifestAudit {
        var audit = ManifestAudit()
        var checkpointFiles: [UInt64: String] = [:]
        var segmentFiles: Set<UInt64> = []
        for name in names {
            if let sequence = CheckpointFile.sequence(ofFileName: name) {
                checkpointFiles[sequence] = name
            } else if let sequence = LogSegment.sequence(ofFileName: name) {
                segmentFiles.insert(sequence)
            } else if name.hasPrefix("damaged-") {
                logger.notice(
                    "store: \(name) in \(directory) holds bytes cut from the end of the log at an earlier start or repair; kept to be inspected, never read: remove it when done"
                )
            } else if name != "LOCK" && name != Manifest.fileName {
                // Never read, never removed: a file of another name cannot change a room.
                logger.warning("store: ignoring \(name) in \(directory): not a file snapsyncd writes")
            }
        }
        guard let manifest else {
            audit.checkpoints = checkpointFiles.sorted { $0.key < $1.key }.map { (name: $0.value, sequence: $0.key) }
            audit.segments = segmentFiles.sorted()
            audit.nextCheckpoint = (audit.checkpoints.last?.sequence ?? 0) + 1
            audit.nextSegment = (audit.segments.last ?? 0) + 1
            // Segments are only ever deleted oldest first, so the ones left are consecutive.
            if let first = audit.segments.first,
                let gap = (first..<audit.nextSegment).first(where: { !segmentFiles.contains($0) })
            {
                throw StoreError.inconsistent(
                    path: directory + "/" + LogSegment.fileName(gap),
                    reason:
                        "this log segment is missing between \(LogSegment.fileName(first)) and \(LogSegment.fileName(audit.nextSegment - 1)): the writes it held would be lost, so the daemon will not start (put the file back, e.g. from a backup)"
                )
            }
            if !checkpointFiles.isEmpty || !segmentFiles.isEmpty {
                logger.notice(
                    "store: \(directory) has no MANIFEST (written by an earlier version): taking the \(checkpointFiles.count) checkpoint(s) and \(segmentFiles.count) log segment(s) found, and writing one"
                )
            }
            return audit
        }
        func path(_ name: String) -> String { directory + "/" + name }

        for sequence in manifest.checkpoints where checkpointFiles[sequence] == nil {
            let name = CheckpointFile.fileName(sequence)
            throw StoreError.inconsistent(
                path: path(name),
                reason:
                    "the MANIFEST lists this checkpoint, but the file is missing: the room it holds would be lost, so the daemon will not start (put the file back, e.g. from a backup)"
            )
        }
        for sequence in manifest.segments where !segmentFiles.contains(sequence) {
            let name = LogSegment.fileName(sequence)
            throw StoreError.inconsistent(
                path: path(name),
                reason:
                    "the MANIFEST lists this log segment, but the file is missing: the writes it holds would be lost, so the daemon will not start (put the file back, e.g. from a backup)"
            )
        }

        let listed = Set(manifest.checkpoints)
        let removing = Set(manifest.removing)
        for (sequence, name) in checkpointFiles.sorted(by: { $0.key < $1.key }) {
            if listed.contains(sequence) {
                audit.checkpoints.append((name: name, sequence: sequence))
            } else if removing.contains(sequence) {
                logger.notice("store: removing \(name): superseded by a newer checkpoint, its removal was interrupted")
                audit.leftovers.append(name)
            } else if sequence >= manifest.nextCheckpoint {
                logger.notice("store: taking in \(name), written just before a crash and not yet in the MANIFEST")
                audit.checkpoints.append((name: name, sequence: sequence))
            } else {
                throw StoreError.inconsistent(
                    path: path(name),
                    reason:
                        "this checkpoint is not in the MANIFEST, which lists every checkpoint numbered below \(CheckpointFile.fileName(manifest.nextCheckpoint)): it does not belong to this directory, so the daemon will not start (move it away)"
                )
            }
        }
        let afterListed = manifest.firstSegment + manifest.segmentCount
        for sequence in segmentFiles.sorted() {
            let name = LogSegment.fileName(sequence)
            if manifest.segments.contains(sequence) {
                audit.segments.append(sequence)
            } else if sequence < manifest.firstSegment {
                logger.notice("store: removing \(name): every write in it is in a checkpoint, its removal was interrupted")
                audit.leftovers.append(name)
            } else if sequence == afterListed {
                logger.notice("store: taking in \(name), started just before a crash and not yet in the MANIFEST")
                audit.segments.append(sequence)
            } else {
                throw StoreError.inconsistent(
                    path: path(name),
                    reason:
                        "this log segment is not in the MANIFEST, which lists \(manifest.segmentCount == 0 ? "none" : "\(LogSegment.fileName(manifest.firstSegment)) to \(LogSegment.fileName(afterListed - 1))"): it does not belong to this directory, so the daemon will not start (move it away)"
                )
            }
        }
        audit.nextCheckpoint = max(manifest.nextCheckpoint, (audit.checkpoints.last?.sequence ?? 0) + 1)
        audit.nextSegment = max(afterListed, (audit.segments.last ?? 0) + 1)
        return audit
    }
}
