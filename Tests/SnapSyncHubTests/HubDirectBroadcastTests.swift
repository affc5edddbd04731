import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// A committed pass's broadcast goes straight to the members with nothing queued, through the
// IO layer's `sendBroadcast` (Hub+DirectBroadcast.swift); here a recorder stands in for the IO
// layer, and each member's "socket" takes as many bytes as the test says. What every member
// ends up with, sent plus still queued, must be exactly its stream without the direct path.

@Suite(.unitTests) struct HubDirectBroadcastTests {
    /// The IO layer's stand-in: the bytes each member was sent directly, how many of them its
    /// socket takes (all unless `takes` says), and the calls made.
    final class Sender {
        var sent: [UInt64: [UInt8]] = [:]
        var takes: [UInt64: Int] = [:]
        var calls = 0

        func install(on hub: Hub) {
            hub.sendBroadcast = { [unowned self, unowned hub] spans, members in
                self.calls += 1
                var bytes: [UInt8] = []
                for span in spans { bytes += span.bytes }
                for member in members {
                    member._withUnsafeGuaranteedRef { session in
                        let took = min(self.takes[session.id] ?? bytes.count, bytes.count)
                        self.sent[session.id, default: []] += bytes.prefix(took)
                        if took < bytes.count { hub.queueUnsent(session, sent: took) }
                    }
                }
            }
        }
    }

    /// A member with nothing queued is sent the pass's DIFFs at once, as one run; one whose
    /// socket takes 10 bytes of them has the rest queued, mid-frame; one with a PONG queued gets
    /// them behind it through its queue. Each stream is whole and in order, and the counters are
    /// what queuing everything would have counted.
    @Test func aCommittedPassGoesStraightToMembersWithNothingQueued() {
        let harness = HubHarness()
        let sender = Sender()
        sender.install(on: harness.hub)
        let writer = harness.connect(), idle = harness.connect(), partial = harness.connect(), busy = harness.connect()
        for member in [idle, partial, busy] { _ = harness.join(member, "room") }
        sender.takes[partial.id] = 10
        let framesBefore = harness.hub.stats.framesOut
        let diffsBefore = harness.hub.traffic.framesQueued(type: MessageType.diff.rawValue)
        harness.send(.ping(nonce: 9), from: busy)
        for index in 0..<5 { harness.mutate(writer, "room", addItem("i\(index)", first: index == 0), requestID: UInt64(index)) }
        #expect(harness.hub.finishPass())
        #expect(sender.calls == 1)
        #expect(harness.decode(sender.sent[idle.id] ?? [], as: idle).map(\.diffVersion) == Array(1...5))
        #expect(idle.output.isEmpty && !idle.isDirty)
        #expect(sender.sent[partial.id]?.count == 10)
        #expect(!partial.output.isEmpty, "the rest is queued (and was handed to its transport with the dirty sessions)")
        let partialStream = (sender.sent[partial.id] ?? []) + harness.takeQueuedBytes(partial)
        #expect(harness.decode(partialStream, as: partial).map(\.diffVersion) == Array(1...5))
        #expect(sender.sent[busy.id] == nil)
        let busyGot = harness.drain(busy)
        #expect(busyGot.first == .pong(nonce: 9) && busyGot.dropFirst().map(\.diffVersion) == Array(1...5))
        #expect(harness.drain(writer).map(\.ackVersion) == Array(1...5))
        #expect(harness.hub.stats.framesOut - framesBefore == 15 + 5 + 1)
        #expect(harness.hub.traffic.framesQueued(type: MessageType.diff.rawValue) - diffsBefore == 15)
        harness.checkInvariants("room")
    }

    /// The pass's queues go out before its broadcasts: the writer's ACKs are handed to the IO
    /// layer before the members are sent the DIFFs, so a big room's broadcast does not delay
    /// them; a member's queue emptied by that first round takes the broadcast directly.
    @Test func queuedOutputIsHandedOutBeforeTheBroadcast() {
        let harness = HubHarness()
        let sender = Sender()
        sender.install(on: harness.hub)
        var events: [String] = []
        let recordBroadcast = harness.hub.sendBroadcast!
        harness.hub.sendBroadcast = { spans, members in
            events.append("broadcast to \(members.count)")
            recordBroadcast(spans, members)
        }
        harness.hub.sendPass = { sessions in
            events.append("queues of \(sessions.count)")
            // The IO layer sends each queue whole.
            for session in sessions { session.output.consume(session.output.pendingBytes) }
        }
        let writer = harness.connect(), pinger = harness.connect(), member = harness.connect()
        for session in [pinger, member] { _ = harness.join(session, "room") }
        _ = harness.hub.finishPass()  // the sessions the joins left dirty
        events.removeAll()
        harness.send(.ping(nonce: 3), from: pinger)
        for index in 0..<3 { harness.mutate(writer, "room", addItem("i\(index)", first: index == 0), requestID: UInt64(index)) }
        #expect(harness.hub.finishPass())
        #expect(events == ["queues of 2", "broadcast to 2"], "the writer's ACKs and the PONG first, then the DIFFs")
        #expect(harness.decode(sender.sent[pinger.id] ?? [], as: pinger).map(\.diffVersion) == Array(1...3))
        #expect(harness.decode(sender.sent[member.id] ?? [], as: member).map(\.diffVersion) == Array(1...3))
    }

    /// Before its commit a pass's broadcast is only ever queued: a member pinging mid-pass
    /// flushes the room's DIFFs into every member's queue, and the IO layer is not asked.
    @Test func aBroadcastFlushedBeforeTheCommitIsQueued() {
        let harness = HubHarness()
        let sender = Sender()
        sender.install(on: harness.hub)
        let writer = harness.connect(), first = harness.connect(), second = harness.connect()
        for member in [first, second] { _ = harness.join(member, "room") }
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.send(.ping(nonce: 1), from: first)
        #expect(!second.output.isEmpty, "the ping flushed the room's DIFF into every member's queue")
        #expect(harness.hub.finishPass())
        #expect(sender.calls == 0)
        #expect(harness.drain(second).map(\.diffVersion) == [1])
        let firstGot = harness.drain(first)
        #expect(firstGot.count == 2 && firstGot[0].diffVersion == 1 && firstGot[1] == .pong(nonce: 1))
    }

    /// Members of versions 2 and 4 in one room: each gets its own frames directly (version 3 on
    /// carry the room's chain), one call per kind; a version 1 member of an outline room keeps
    /// the queue's path and is sent LEFT.
    @Test func eachVersionGetsItsOwnFramesDirectly() {
        let harness = HubHarness()
        let sender = Sender()
        sender.install(on: harness.hub)
        let writer = harness.connect()
        let plain = harness.connect(versions: [2]), chained = harness.connect(), flat = harness.connect(versions: [1])
        for member in [plain, chained, flat] { _ = harness.join(member, "room") }
        for index in 0..<3 { harness.mutate(writer, "room", addItem("i\(index)", first: index == 0), requestID: UInt64(index)) }
        harness.mutate(writer, "room", [.appendChildren([hubElement("child")], toParent: "i0")], requestID: 9)
        #expect(harness.hub.finishPass())
        #expect(sender.calls == 2)
        let plainGot = harness.decode(sender.sent[plain.id] ?? [], as: plain)
        let chainedGot = harness.decode(sender.sent[chained.id] ?? [], as: chained)
        #expect(plainGot.map(\.diffVersion) == Array(1...4) && chainedGot.map(\.diffVersion) == Array(1...4))
        #expect(plainGot.allSatisfy { if case .diff(_, _, _, _, nil) = $0 { true } else { false } }, "version 2: no chain")
        #expect(chainedGot.allSatisfy { if case .diff(_, _, _, _, .some) = $0 { true } else { false } }, "version 4: the chain")
        #expect(sender.sent[flat.id] == nil)
        let flatGot = harness.drain(flat)
        #expect(flatGot.prefix(3).map(\.diffVersion) == Array(1...3))
        #expect(flatGot.count == 4 && { if case .left = flatGot[3] { true } else { false } }())
        harness.checkInvariants("room")
    }
}
