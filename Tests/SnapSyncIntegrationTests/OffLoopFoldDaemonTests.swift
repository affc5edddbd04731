import SnapSyncModel
import SnapSyncWire
import Testing

// A room over 1 MiB is folded off the daemon's loop (Hub+FoldedCatchup.swift, the daemon's
// LoopWorker): the resuming JOIN waits for the worker, and the requests its connection sent
// after it are answered after it, in order.

@Suite("A large room's resume is folded off the loop", .serialized)
struct OffLoopFoldDaemonTests {
    @Test(
        "a version 3 resume of a 1.2 MB room after 200 writes gets the folded CATCHUP from the worker, then its connection's pipelined requests in order; the state is the room's",
        .timeLimit(.minutes(5)))
    func largeRoomResume() throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let room = "large"
        let writer = try RawClient.ready(daemon, versions: [3])
        let payload = SnapshotPayload(Array(repeating: UInt8(ascii: "p"), count: 800))
        let items = (0..<1_500).map { SnapshotElement(SnapshotIdentifier("item-\($0)"), payload: payload) }
        for ops: [SnapshotOperation] in [[.appendSections(["s"])], [.appendItems(items, toSection: "s")]] {
            guard case .ack = try writer.request({ .mutate(requestID: $0, room: room, expectedVersion: nil, writeID: [], ops: ops) }).answer else {
                throw RawClientError.failed("the setup write was not acknowledged")
            }
        }

        let reader = try RawClient.ready(daemon, versions: [3])
        guard
            case .snapshot(_, _, let epoch, let version, _, _, let held, let chain?) = try reader.request({ .join(requestID: $0, room: room, resume: nil) })
                .answer
        else { throw RawClientError.failed("no SNAPSHOT") }
        #expect(held.canonicalByteCount > 1 << 20)
        for k in 0..<200 {
            let hot = SnapshotElement(
                SnapshotIdentifier("item-\(k % 5)"), payload: SnapshotPayload(Array("update \(k) of one of five hot items, long enough to weigh".utf8)))
            guard
                case .ack = try writer.request({ .mutate(requestID: $0, room: room, expectedVersion: nil, writeID: [], ops: [.updateItems([hot], .reload)]) })
                    .answer
            else { throw RawClientError.failed("a write was not acknowledged") }
        }

        // The resume and two requests behind it, in one send.
        let again = try RawClient.ready(daemon, versions: [3])
        var frames = FrameEncoder().encode(.join(requestID: 5, room: room, resume: RoomPosition(epoch: epoch, version: version), chain: chain))
        frames += FrameEncoder().encode(.leave(requestID: 6, room: "never-joined"))
        frames += FrameEncoder().encode(.join(requestID: 7, room: "small", resume: nil))
        try again.send(raw: frames)
        let answers = try (0..<4).map { _ in try again.receive() }
        guard case .catchup(5, room, epoch, version, let to, .folded(let digest)?) = answers[0],
            case .diff(room, epoch, to, let ops, _) = answers[1], case .reject(6, _, _, _, _) = answers[2],
            case .snapshot(7, "small", _, _, _, _, _, _) = answers[3]
        else {
            Issue.record("expected the folded CATCHUP, its DIFF, then the answers to requests 6 and 7: \(answers.map { "\($0)".prefix(120) })")
            return
        }
        var state = held
        try state.apply(ops, limits: .unlimited)
        #expect(to == version + 200 && state.digest == digest)
        #expect(ops.count <= 5, "the net change: five items")
        let stats = try RawClient.ready(daemon).stats()
        #expect(stats["catchups_folded"] == 1 && stats["catchup_folds_deferred"] == 0)
    }
}
