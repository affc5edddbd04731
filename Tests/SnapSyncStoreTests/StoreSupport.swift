// Helpers for the store's tests: temporary data directories, DIFF frames, a log handler that
// keeps the lines, and a tiny "daemon" that applies writes to rooms and logs them.

import Foundation
import Testing
import SnapSyncTestSupport
import Logging
import Synchronization
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory under /tmp, removed (with its contents) by `remove()`.
struct TempDirectory {
    let path: String

    init(_ label: String = "store") {
        var template = Array("/tmp/snapsync-\(label)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: \(errno)")
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    var data: String { path + "/data" }

    func remove() { removeTree(path) }
}

/// Removes `path` and everything under it, as `rm -rf` does, in-process (the unit lane starts
/// no child process). A directory a test left without its owner's permissions gets them back
/// first, so that its contents can go too.
func removeTree(_ path: String) {
    if (try? FileManager.default.removeItem(atPath: path)) != nil { return }
    restoreOwnerAccess(path)
    try? FileManager.default.removeItem(atPath: path)
}

/// Gives every directory under `path` (itself included) read, write and search to its owner.
private func restoreOwnerAccess(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return }
    _ = chmod(path, (info.st_mode & 0o7777) | S_IRWXU)
    for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { restoreOwnerAccess(path + "/" + name) }
}

/// A temporary directory with a 1 MiB tmpfs mounted at `mnt`, for full-disk tests (mounting
/// needs root). mount(2) and umount2(2) are called directly: the unit lane starts no child
/// process. `remove()` unmounts it and removes the directory.
struct SmallTmpfs {
    let directory: TempDirectory

    init(_ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
        directory = TempDirectory(label)
        let mnt = directory.path + "/mnt"
        let mounted = mkdir(mnt, 0o755) == 0 && mount("tmpfs", mnt, "tmpfs", 0, "size=1m") == 0
        #expect(mounted, "cannot mount a tmpfs at \(mnt): \(String(cString: strerror(errno)))", sourceLocation: sourceLocation)
    }

    var path: String { directory.path }
    var mnt: String { directory.path + "/mnt" }

    func remove() {
        _ = umount2(mnt, 0)
        directory.remove()
    }
}

/// Writes `bytes` zero bytes to a new file at `path`, `block` bytes at a time, as
/// `dd if=/dev/zero` does (on a tmpfs every page written is allocated). False when a write
/// fails, e.g. for lack of space; the file is left as far as it got.
func fillFile(_ path: String, bytes: Int, block: Int = 64 << 10) -> Bool {
    guard FileManager.default.createFile(atPath: path, contents: nil), let file = FileHandle(forWritingAtPath: path) else {
        return false
    }
    defer { try? file.close() }
    let zeros = Data(count: block)
    var left = bytes
    do {
        while left > 0 {
            let n = min(left, block)
            try file.write(contentsOf: n == block ? zeros : zeros.prefix(n))
            left -= n
        }
    } catch {
        return false
    }
    return true
}

/// Every line the store logged (SnapSyncTestSupport's `LogCapture`).
typealias LogLines = LogCapture

/// A DIFF frame as the daemon encodes it.
func diffFrame(room: String, epoch: UInt64, version: UInt64, ops: [SnapshotOperation]) -> [UInt8] {
    var frame: [UInt8] = []
    FrameEncoder().encodeDiff(room: room, epoch: epoch, version: version, ops: ops, into: &frame)
    return frame
}

/// What the daemon does with rooms, reduced to what the store sees: apply, log, sync.
struct Rooms {
    struct Room: Equatable {
        var epoch: UInt64
        var version: UInt64
        var snapshot: RoomSnapshot
    }

    var rooms: [String: Room] = [:]
    var writes: [WriteRecord] = []
    /// With `keepsStates`, every room's state after each version (index 0: empty), so that a
    /// test can know the state at any version without the store: a copy per write, for short
    /// tests only.
    var keepsStates = false
    private(set) var states: [String: [RoomSnapshot]] = [:]

    init() {}

    init(keepingStates: Bool) { keepsStates = keepingStates }

    init(recovered: [RecoveredRoom]) {
        for r in recovered { rooms[r.name] = Room(epoch: r.epoch, version: r.version, snapshot: r.snapshot) }
    }

    /// Applies `ops` to `room` (created at epoch `epoch`), and appends the write to `store`.
    @discardableResult
    mutating func write(
        _ room: String, _ ops: [SnapshotOperation], epoch: UInt64 = 7, writeID: [UInt8] = [], fingerprint: UInt64? = nil,
        to store: DurableStore
    ) throws -> WriteRecord {
        try store.reserve()
        var r = rooms[room] ?? Room(epoch: epoch, version: 0, snapshot: RoomSnapshot())
        try r.snapshot.apply(ops, limits: .unlimited)
        r.version += 1
        rooms[room] = r
        if keepsStates { states[room, default: [RoomSnapshot()]].append(r.snapshot) }
        let write = WriteRecord(
            room: room, epoch: r.epoch, version: r.version, writeID: writeID, fingerprint: fingerprint,
            diffFrame: diffFrame(room: room, epoch: r.epoch, version: r.version, ops: ops))
        store.append(write)
        writes.append(write)
        return write
    }

    /// A deterministic stream of writes: each appends one item to one of `roomCount` rooms.
    mutating func writeMany(
        _ count: Int, rooms roomCount: Int = 3, payloadBytes: Int = 20,
        to store: DurableStore, syncEvery: Int = 1
    ) throws {
        for i in 0..<count {
            let room = "room-\(i % roomCount)"
            var ops: [SnapshotOperation] = []
            if rooms[room] == nil { ops.append(.appendSections([SnapshotElement("s")])) }
            let n = (rooms[room]?.snapshot.numberOfItems ?? 0)
            ops.append(
                .appendItems(
                    [
                        SnapshotElement(
                            SnapshotIdentifier("\(room)-item-\(n)"),
                            payload: SnapshotPayload(Array(repeating: UInt8(i & 0xFF), count: payloadBytes)))
                    ],
                    toSection: "s"))
            try write(room, ops, epoch: UInt64(100 + i % roomCount), to: store)
            if (i + 1) % syncEvery == 0 { try store.sync() }
        }
    }

    /// The room as the daemon pushes it for a checkpoint: its last 20 DIFF frames, and its
    /// chain before them (`chain(of:epoch:at:)`) unless `withChain` is false (what a daemon
    /// that did not know the room's chain pushes).
    func image(_ name: String, withChain: Bool = true) -> RoomImage? {
        rooms[name].map {
            let frames = writes(of: name).filter { [epoch = $0.epoch] in $0.epoch == epoch }.suffix(20)
            return RoomImage(
                room: name, epoch: $0.epoch, version: $0.version, snapshot: $0.snapshot,
                diffFrames: frames.map(\.diffFrame),
                chain: withChain ? chain(of: name, epoch: $0.epoch, at: $0.version - UInt64(frames.count)) : nil)
        }
    }

    /// The room's state at `version` (`keepsStates`); nil when not kept.
    func state(of room: String, at version: UInt64) -> RoomSnapshot? {
        states[room].flatMap { version < $0.count ? $0[Int(version)] : nil }
    }

    /// `image(name)` with the room's resume base: its state before the image's frames.
    func imageWithBase(_ name: String) -> RoomImage? {
        guard var image = image(name) else { return nil }
        image.base = state(of: name, at: image.version - UInt64(image.diffFrames.count))
        return image
    }

    /// The writes of one room, in order.
    func writes(of room: String) -> [WriteRecord] { writes.filter { $0.room == room } }

    /// The room's chain at `version`, computed from the writes made here, independently of the
    /// store: `RoomChain.start(epoch:)` moved over the DIFF frames of versions 1 ... `version`
    /// of the incarnation `epoch`, in order. Nil when those writes are not all here.
    func chain(of room: String, epoch: UInt64, at version: UInt64) -> RoomChain? {
        let frames = writes.filter { $0.room == room && $0.epoch == epoch && $0.version <= version }
        guard frames.map(\.version) == Array(0..<version).map({ $0 + 1 }) else { return nil }
        return frames.reduce(RoomChain.start(epoch: epoch)) { $0.next(frame: $1.diffFrame) }
    }
}

/// What the daemon's one-second timer does: `maintain`, then the images of the rooms it says
/// are due, pushed to `checkpoint`. Returns the rooms that were due.
@discardableResult
func maintain(_ store: DurableStore, _ rooms: Rooms, now: ContinuousClock.Instant = .now) throws -> [String] {
    let due = try store.maintain(now: now)
    if !due.isEmpty { try store.checkpoint(due.lazy.compactMap { rooms.image($0) }) }
    return due
}

/// What the daemon does at shutdown: `close` with the images of the rooms `roomsDueAtClose` names.
func close(_ store: DurableStore, _ rooms: Rooms) throws {
    try store.close(checkpointing: store.roomsDueAtClose().compactMap { rooms.image($0) })
}

/// Opens a store in `dir`, writes `count` records (see `Rooms.writeMany`), and closes it cleanly.
/// Returns what was written and the path of the log segment that holds it.
func writeClosedLog(
    _ count: Int, rooms roomCount: Int = 3, payloadBytes: Int = 20,
    in dir: TempDirectory
) throws -> (rooms: Rooms, segment: String) {
    let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
    var rooms = Rooms()
    try rooms.writeMany(count, rooms: roomCount, payloadBytes: payloadBytes, to: store)
    let segment = dir.data + "/" + store.activeSegmentName
    try store.close()
    return (rooms, segment)
}

/// Small sizes, so that tests exercise preallocation, rotation and checkpoints quickly. The
/// background work runs inline (every step at its call) unless `backgroundThread`. A
/// checkpoint batch has no time budget: how many rooms one `checkpoint` takes must not depend
/// on how fast the disk is (`checkpointBatchStopsOnceItsTimeIsSpent` drives the budget).
func smallOptions(
    _ directory: String, fsync: FsyncPolicy = .always, segmentBytes: Int = 64 << 10,
    historyLimit: Int = 16, backgroundThread: Bool = false, keepsResumeBases: Bool = false
) -> StoreOptions {
    StoreOptions(
        directory: directory, fsync: fsync, segmentBytes: segmentBytes, maxDiffFrameBytes: 4 << 10,
        preallocationBytes: 16 << 10, checkpointInterval: .seconds(60),
        checkpointBytesPerCall: 1 << 20, checkpointBatchDuration: nil, historyLimit: historyLimit, backgroundThread: backgroundThread,
        keepsResumeBases: keepsResumeBases)
}

func expectSameRooms(
    _ recovered: [RecoveredRoom], _ expected: Rooms,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(recovered.map(\.name) == expected.rooms.keys.sorted(), sourceLocation: sourceLocation)
    for r in recovered {
        guard let e = expected.rooms[r.name] else { continue }
        #expect(r.epoch == e.epoch, "epoch of \(r.name)", sourceLocation: sourceLocation)
        #expect(r.version == e.version, "version of \(r.name)", sourceLocation: sourceLocation)
        #expect(r.snapshot == e.snapshot, "snapshot of \(r.name)", sourceLocation: sourceLocation)
        #expect(throws: Never.self, sourceLocation: sourceLocation) { try r.snapshot.checkInvariants() }
    }
    expectSameChains(recovered, expected, sourceLocation: sourceLocation)
}

/// Each recovered room's chain, before its history and at its version, is the one computed
/// from the writes made (`Rooms.chain(of:epoch:at:)`).
func expectSameChains(
    _ recovered: [RecoveredRoom], _ expected: Rooms,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    for r in recovered {
        let before = expected.chain(of: r.name, epoch: r.epoch, at: r.version - UInt64(r.history.count))
        #expect(before != nil, "the writes of \(r.name) are known", sourceLocation: sourceLocation)
        #expect(r.chain == before, "chain of \(r.name) before its history", sourceLocation: sourceLocation)
        #expect(
            r.chainAtVersion == expected.chain(of: r.name, epoch: r.epoch, at: r.version), "chain of \(r.name) at its version",
            sourceLocation: sourceLocation)
    }
}

// MARK: - Files

func readFile(_ path: String) -> [UInt8] {
    guard let f = fopen(path, "rb") else { return [] }
    defer { fclose(f) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = fread(&buffer, 1, buffer.count, f)
        if n <= 0 { break }
        out.append(contentsOf: buffer[0..<n])
    }
    return out
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let f = fopen(path, "wb")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}

func fileNames(_ directory: String) -> [String] {
    (try? Directory.list(directory).sorted()) ?? []
}

/// `to` becomes a copy of the directory `from` (what `cp -a` gives the store: the names and
/// the bytes), in-process.
func copyDirectory(_ from: String, _ to: String, sourceLocation: SourceLocation = #_sourceLocation) {
    removeTree(to)
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try FileManager.default.copyItem(atPath: from, toPath: to) }
}

/// The byte offsets at which each record of a segment starts, and where its data ends.
func recordOffsets(_ bytes: [UInt8]) -> (starts: [Int], end: Int) {
    var offset = LogSegment.headerSize
    var starts: [Int] = []
    while case .record(_, let next) = RecordFraming.parse(bytes, at: offset, end: bytes.count, maxPayload: 1 << 30) {
        starts.append(offset)
        offset = next
    }
    return (starts, offset)
}
