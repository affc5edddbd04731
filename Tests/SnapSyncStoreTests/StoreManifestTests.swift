// The MANIFEST: a checkpoint or segment that went missing, or one that does not belong, stops
// the start with the file's name; what a crash leaves between a file and its MANIFEST update is
// recognised; a directory written before there was a MANIFEST still opens, and gets one.

import Foundation
import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct StoreManifestTests {
    /// Two rooms, each checkpointed, with writes after the checkpoints; closed cleanly.
    func checkpointedRooms(in dir: TempDirectory) throws -> Rooms {
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        try rooms.writeMany(8, rooms: 2, to: store)
        try store.checkpoint(rooms.image("room-0")!)
        try store.checkpoint(rooms.image("room-1")!)
        try rooms.writeMany(4, rooms: 2, to: store)
        try store.close()
        return rooms
    }

    func checkpointFiles(_ dir: TempDirectory) -> [String] { fileNames(dir.data).filter { $0.hasPrefix("ckpt-") } }

    @Test func manifestRoundTripsAndChecksItsBytes() throws {
        let manifest = Manifest(nextCheckpoint: 9, firstSegment: 3, segmentCount: 2, checkpoints: [4, 8], removing: [7])
        let bytes = manifest.encode()
        #expect(try Manifest.decode(bytes, path: "M") == manifest)
        #expect(manifest.segments == 3..<5)
        for index in bytes.indices {
            var damaged = bytes
            damaged[index] ^= 0x04
            #expect(throws: StoreError.self, "byte \(index)") { _ = try Manifest.decode(damaged, path: "M") }
        }
        #expect(throws: StoreError.self) { _ = try Manifest.decode(bytes + [0], path: "M") }
    }

    /// The repro: move a checkpoint away and the room would be gone. The start is
    /// refused, naming the file, and nothing changes on disk; with the file back, all is there.
    @Test func aMissingCheckpointRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let rooms = try checkpointedRooms(in: dir)
        let victim = checkpointFiles(dir)[0]
        #expect(rename(dir.data + "/" + victim, dir.path + "/" + victim) == 0)
        let before = fileNames(dir.data)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .inconsistent(let path, let reason) = error as? StoreError else { return false }
            return path == dir.data + "/" + victim && reason.contains("missing") && reason.contains("will not start")
        }
        #expect(fileNames(dir.data) == before)
        #expect(rename(dir.path + "/" + victim, dir.data + "/" + victim) == 0)
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
    }

    @Test func aMissingSegmentRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(6, rooms: 2, to: store)
            try store.close()
        }
        do {
            // Opened again: the first segment is now a closed one, the second active.
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try store.close()
        }
        let first = LogSegment.fileName(1)
        #expect(fileNames(dir.data).contains(first))
        #expect(unlink(dir.data + "/" + first) == 0)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .inconsistent(let path, let reason) = error as? StoreError else { return false }
            return path == dir.data + "/" + first && reason.contains("missing")
        }
    }

    /// A checkpoint from another data directory, under a number below this one's next
    /// checkpoint that its MANIFEST does not list: it cannot be a file written just before a
    /// crash. Refused, naming it; so is a log segment numbered past the log.
    @Test func foreignCheckpointsAndSegmentsRefuseToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let rooms = try checkpointedRooms(in: dir)
        let other = TempDirectory()
        defer { other.remove() }
        _ = try checkpointedRooms(in: other)
        let foreign = [
            (CheckpointFile.fileName(0), readFile(other.data + "/" + checkpointFiles(other)[0])),
            (LogSegment.fileName(9), LogSegment.header(sequence: 9)),
        ]
        for (name, bytes) in foreign {
            writeFile(dir.data + "/" + name, bytes)
            #expect {
                _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            } throws: { error in
                guard case .inconsistent(let path, let reason) = error as? StoreError else { return false }
                return path == dir.data + "/" + name && reason.contains("not in the MANIFEST") && reason.contains("will not start")
            }
            #expect(unlink(dir.data + "/" + name) == 0)
        }
        // Files of other names are never read: ignored, with a warning.
        writeFile(dir.data + "/notes.txt", [1, 2, 3])
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(lines.contains("ignoring notes.txt"))
    }

    /// A crash after a new checkpoint is renamed into place but before the MANIFEST lists it:
    /// the new file (numbered at or above the MANIFEST's next checkpoint) is taken in, and the
    /// older checkpoint of its room, still listed, is superseded and removed.
    @Test func aCheckpointWrittenJustBeforeACrashIsTakenIn() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(4, rooms: 1, to: store)
            try store.checkpoint(rooms.image("room-0")!)
            let old = checkpointFiles(dir)[0]
            let oldBytes = readFile(dir.data + "/" + old)
            let manifest = readFile(dir.data + "/" + Manifest.fileName)
            try rooms.writeMany(3, rooms: 1, to: store)
            try store.checkpoint(rooms.image("room-0")!)
            // Back to the moment before the MANIFEST write: old MANIFEST, old file still there.
            writeFile(dir.data + "/" + Manifest.fileName, manifest)
            writeFile(dir.data + "/" + old, oldBytes)
            try store.sync()
        }
        #expect(checkpointFiles(dir).count == 2)
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(lines.contains("taking in ckpt-"), "\(lines.all)")
        #expect(checkpointFiles(dir).count == 1)
        #expect(try Manifest.read(directory: dir.data)?.checkpoints == [2])
    }

    /// A crash after the MANIFEST dropped files but before they were unlinked: a superseded
    /// checkpoint (in the MANIFEST's removing list) and a segment below its first one are
    /// removed. A segment started but not yet listed (the one after the last) is taken in.
    @Test func leftoversOfACrashAreRecognised() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let options = smallOptions(dir.data, segmentBytes: 4 << 10)
        let start = ContinuousClock.now
        var removedSegment: (String, [UInt8])?
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger, now: start)
            let first = dir.data + "/" + store.activeSegmentName
            try rooms.writeMany(60, rooms: 2, payloadBytes: 100, to: store)
            let firstBytes = readFile(first)
            for round in 0..<5 {
                try rooms.writeMany(10, rooms: 2, payloadBytes: 100, to: store)
                try maintain(store, rooms, now: start + .milliseconds(round))
            }
            #expect(store.statistics.segmentsDeleted > 0)
            removedSegment = (first, firstBytes)
            try store.close()
        }
        let manifest = try #require(try Manifest.read(directory: dir.data))
        #expect(manifest.firstSegment > 1)
        // The deleted first segment and a superseded checkpoint come back, as if never unlinked.
        let (path, bytes) = try #require(removedSegment)
        writeFile(path, bytes)
        var edited = manifest
        let ghost = try #require((1..<manifest.nextCheckpoint).first { !manifest.checkpoints.contains($0) })
        edited.removing = [ghost]
        let ghostName = CheckpointFile.fileName(ghost)
        writeFile(dir.data + "/" + ghostName, readFile(dir.data + "/" + CheckpointFile.fileName(manifest.checkpoints[0])))
        writeFile(dir.data + "/" + Manifest.fileName, edited.encode())
        // And a segment started just before the crash: header only.
        let next = manifest.firstSegment + manifest.segmentCount
        writeFile(dir.data + "/" + LogSegment.fileName(next), LogSegment.header(sequence: next))
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: options, logger: lines.logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(!fileNames(dir.data).contains(lastPathComponent(path)))
        #expect(lines.contains("removing \(lastPathComponent(path))"), "\(lines.all)")
        #expect(lines.contains("taking in \(LogSegment.fileName(next))"), "\(lines.all)")
        #expect(!fileNames(dir.data).contains(ghostName))
        #expect(lines.contains("removing \(ghostName)"), "\(lines.all)")
        #expect(store.segmentNames.first == LogSegment.fileName(manifest.firstSegment))
        #expect(store.activeSegmentName == LogSegment.fileName(next + 1))
    }

    /// A start that takes in an unlisted segment (a crash left it) starts the segment after it:
    /// a second crash right after that segment is in place must not leave two unlisted ones.
    @Test func aCrashDuringAStartThatTookInASegmentStartsAgain() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = try checkpointedRooms(in: dir)
        let manifest = try #require(try Manifest.read(directory: dir.data))
        // The segment the next start begins, with one write of room-0 in it.
        let next = manifest.firstSegment + manifest.segmentCount
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(1, rooms: 1, to: store)
            try store.close()
        }
        #expect(try #require(try Manifest.read(directory: dir.data)).segments.upperBound == next + 1)
        // The crash came before the MANIFEST that lists it: `next` is unlisted.
        writeFile(dir.data + "/" + Manifest.fileName, manifest.encode())
        let saved = dir.path + "/saved"
        let (store, recovered) = try DurableStore.open(
            options: smallOptions(dir.data), logger: LogLines().logger,
            progress: nil, segmentInstalled: { copyDirectory(dir.data, saved) })
        expectSameRooms(recovered, rooms)
        try store.close()
        let (again, fromCrash) = try DurableStore.open(options: smallOptions(saved), logger: LogLines().logger)
        defer { try? again.close() }
        expectSameRooms(fromCrash, rooms)
    }

    /// A data directory written by the previous version (no MANIFEST) opens as before and gets
    /// one; from then on a missing checkpoint is caught.
    @Test func aDirectoryWithoutManifestOpensAndGetsOne() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = try checkpointedRooms(in: dir)
        #expect(unlink(dir.data + "/" + Manifest.fileName) == 0)
        let lines = LogLines()
        do {
            let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
            expectSameRooms(recovered, rooms)
            try rooms.writeMany(2, rooms: 2, to: store)
            try store.close()
        }
        #expect(lines.contains("has no MANIFEST"), "\(lines.all)")
        let manifest = try #require(try Manifest.read(directory: dir.data))
        #expect(manifest.checkpoints.map(CheckpointFile.fileName) == checkpointFiles(dir))
        let victim = checkpointFiles(dir)[1]
        #expect(unlink(dir.data + "/" + victim) == 0)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .inconsistent(let path, _) = error as? StoreError else { return false }
            return path == dir.data + "/" + victim
        }
    }

    /// A directory from the previous version with a segment missing between two others.
    @Test func aGapInSegmentsWithoutManifestRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        for _ in 0..<3 {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(2, rooms: 1, to: store)
            try store.close()
        }
        #expect(unlink(dir.data + "/" + Manifest.fileName) == 0)
        #expect(unlink(dir.data + "/" + LogSegment.fileName(2)) == 0)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .inconsistent(let path, _) = error as? StoreError else { return false }
            return path == dir.data + "/" + LogSegment.fileName(2)
        }
    }
}

/// The MANIFEST on a full disk: a checkpoint written into the last free page, then no room for
/// the MANIFEST. Maintenance goes on (a full disk is never fatal), the replaced checkpoint
/// stays until a MANIFEST can drop it, and every restart on the way opens to the same rooms.
/// Uses a 1 MiB tmpfs, which needs root (as StoreSpaceTests).
@Suite(.enabled(if: getuid() == 0, "mounting a small tmpfs needs root"), .unitTests)
struct StoreManifestSpaceTests {
    @Test func aFullDiskDelaysTheManifestWithoutLosingFiles() throws {
        let tmpfs = SmallTmpfs("manifest-full")
        defer { tmpfs.remove() }
        let mnt = tmpfs.mnt
        let data = mnt + "/data"
        let options = smallOptions(data)
        var rooms = Rooms()
        let lines = LogLines()
        do {
            let (store, _) = try DurableStore.open(options: options, logger: lines.logger)
            try rooms.writeMany(10, rooms: 2, to: store)
            try store.checkpoint(rooms.image("room-0")!)
            try store.checkpoint(rooms.image("room-1")!)
            try rooms.writeMany(10, rooms: 2, to: store)
            try store.switchSegmentNow()
            // One free page left: room-0's new checkpoint fits, the MANIFEST after it does not.
            let free = try #require(DataDirectory.freeBytes(mnt))
            #expect(fillFile(mnt + "/filler", bytes: (free / 4096 - 1) * 4096, block: 4096))
            try maintain(store, rooms)
            #expect(lines.contains("no space to rewrite the MANIFEST"), "\(lines.all)")
            #expect(store.checkpointsToRemove.count == 1)
            let saved = tmpfs.path + "/saved"
            copyDirectory(data, saved)
            do {
                // A crash now: the unlisted new checkpoint is taken in, the old one superseded.
                let (again, recovered) = try DurableStore.open(options: smallOptions(saved), logger: LogLines().logger)
                expectSameRooms(recovered, rooms)
                try again.close()
            }
            // Space again: the next maintenance writes the MANIFEST and removes the old checkpoint.
            try FileManager.default.removeItem(atPath: mnt + "/filler")
            try maintain(store, rooms)
            #expect(store.checkpointsToRemove.isEmpty)
            #expect(fileNames(data).filter { $0.hasPrefix("ckpt-") }.count == 2)
            try rooms.writeMany(2, rooms: 2, to: store)
            try store.sync()
            // Crash: no close.
        }
        let (store, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
    }

    /// A full disk fails the MANIFEST of a segment switch, so the new active segment is unlisted
    /// (recovery takes it in: the one after the last listed). The segment after it is not
    /// installed until a MANIFEST lists the active one: a crash with both unlisted would refuse
    /// the start.
    @Test func noSegmentIsInstalledPastAnUnlistedActiveOne() throws {
        let tmpfs = SmallTmpfs("manifest-switch-full")
        defer { tmpfs.remove() }
        let mnt = tmpfs.mnt
        let data = mnt + "/data"
        var rooms = Rooms()
        let lines = LogLines()
        let (store, _) = try DurableStore.open(options: smallOptions(data), logger: lines.logger)
        defer { try? store.close() }
        try rooms.writeMany(10, rooms: 2, to: store)
        func fill(_ name: String) throws {
            let free = try #require(DataDirectory.freeBytes(mnt))
            #expect(fillFile(mnt + "/" + name, bytes: (free / 4096 - 1) * 4096, block: 4096))
        }
        // One free page: segment 2 gets its header but no preallocation, so its trim at the
        // next switch frees nothing.
        try fill("filler-1")
        try store.switchSegmentNow()
        #expect(store.activeSegmentName == LogSegment.fileName(2))
        try fill("filler-2")
        try store.switchSegmentNow()
        #expect(store.activeSegmentName == LogSegment.fileName(3))
        #expect(lines.contains("no space to rewrite the MANIFEST"), "\(lines.all)")
        #expect(try #require(try Manifest.read(directory: data)).segments.upperBound == 3)
        try FileManager.default.removeItem(atPath: mnt + "/filler-1")
        try FileManager.default.removeItem(atPath: mnt + "/filler-2")
        // Segment 4 prepared and due, as the loop does it between two ticks.
        try store.prepareNextSegment()
        try store.finishBackgroundWork()
        store.background.switchDue = true
        try store.installNextSegment()
        try store.finishBackgroundWork()
        let saved = tmpfs.path + "/saved"
        copyDirectory(data, saved)
        let (again, recovered) = try DurableStore.open(options: smallOptions(saved), logger: LogLines().logger)
        expectSameRooms(recovered, rooms)
        try again.close()
        // The next tick lists segment 3; then 4 is installed and takes over.
        try maintain(store, rooms)
        #expect(try #require(try Manifest.read(directory: data)).segments.upperBound == 4)
        try store.finishBackgroundWork()
        try store.switchSegmentIfReady(now: .now)
        #expect(store.activeSegmentName == LogSegment.fileName(4))
    }
}
