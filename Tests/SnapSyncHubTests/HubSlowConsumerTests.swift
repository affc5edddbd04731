import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// A member that does not read: past its output cap it is cut off with ERROR slow_consumer and
// leaves the room; the other members and the writer are unaffected. Past the output budget of
// all sessions together, the largest queue is cut off first.

@Suite(.unitTests) struct HubSlowConsumerTests {
    @Test func aMemberPastItsOutputCapIsCutOffAndTheOthersGetEveryDiff() {
        let harness = HubHarness { $0.maxOutputBytes = 4096 }
        let writer = harness.connect(), reader = harness.connect(), slow = harness.connect()
        harness.join(reader, "room")
        harness.join(slow, "room")
        let payload = String(repeating: "p", count: 400)
        var versions: [UInt64] = []
        for index in 0..<20 {
            let item: SnapshotOperation = .appendItems([hubElement("i\(index)", payload)], toSection: "s")
            harness.mutate(writer, "room", (index == 0 ? [.appendSections([hubElement("s")])] : []) + [item])
            versions.append(UInt64(index + 1))
            // The reader reads after every write; the slow member never does.
            #expect(harness.drain(reader).map(\.diffVersion) == [UInt64(index + 1)])
        }
        #expect(harness.drain(writer).map(\.ackVersion) == versions)
        #expect(slow.state == .closing && slow.memberships.isEmpty)
        #expect(harness.hub.rooms["room"]?.members.sessions.map(\.id) == [reader.id])
        #expect(harness.hub.stats.slowConsumerDisconnects == 1)
        let cutOff = harness.drain(slow)
        #expect(cutOff.last?.errorCode == .slowConsumer)
        // What it had not started receiving was dropped: a DIFF or two, then the ERROR.
        #expect(cutOff.count < 5 && cutOff.dropLast().allSatisfy { $0.diffVersion != nil })
        harness.checkInvariants("room")
    }

    @Test func pastTheOutputBudgetTheLargestQueueIsCutOffFirst() {
        let harness = HubHarness { $0.maxOutputTotalBytes = 8192 }
        let greedy = harness.connect(), modest = harness.connect()
        var modestRequests = 0
        for index in 0..<40 {
            harness.send(.stats(requestID: UInt64(index)), from: greedy)
            if index % 4 == 0 {
                harness.send(.stats(requestID: UInt64(index)), from: modest)
                modestRequests += 1
            }
        }
        #expect(greedy.state == .closing && modest.state == .ready)
        #expect(harness.hub.stats.slowConsumerDisconnects == 1)
        #expect(harness.drain(greedy).last?.errorCode == .slowConsumer)
        #expect(harness.drain(modest).count == modestRequests)
        #expect(harness.hub.outputBytes == 0)
    }
}
