import Foundation
import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncStoreTestSupport
import SnapSyncWire
import Testing

@testable import SnapSyncHub

// The quotas on new rooms (Hub+RoomCreation.swift): a request that would create a room is
// refused quota_exceeded once the store holds --max-stored-rooms rooms, once the data directory
// passes --max-data-bytes or its disk runs low, or once the principal has created its rooms for
// the minute; a room that exists is never refused, and the room refused is left as it was.

@Suite struct HubRoomQuotaTests {
    /// A hub on a durable store in a fresh directory (writes inline, no background thread).
    struct Durable {
        let directory: String
        let harness: HubHarness

        init(_ configure: (inout ServerConfiguration) -> Void) throws {
            var template = Array("/tmp/snapsync-quota-XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            precondition(made != nil, "mkdtemp failed: \(errno)")
            directory = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
            let options = StoreOptions(
                directory: directory + "/data", segmentBytes: 64 << 10, maxDiffFrameBytes: 64 << 10, preallocationBytes: 16 << 10,
                backgroundThread: false)
            let (store, recovered) = try DurableStore.open(options: options, logger: Logger(label: "quota-tests"))
            harness = HubHarness(store: store, configure)
            try harness.hub.restore(recovered)
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    static let section: [SnapshotOperation] = [.appendSections([SnapshotElement("s")])]

    /// The answer to a MUTATE of `room` that appends a section named `section`.
    static func write(_ harness: HubHarness, _ session: Session, _ room: String, section: String = "s") -> Message? {
        harness.mutate(session, room, [.appendSections([SnapshotElement(SnapshotIdentifier(section))])])
        return harness.drain(session).last { if case .diff = $0 { false } else { true } }
    }

    static func isQuotaExceeded(_ message: Message?) -> Bool {
        if case .reject(_, ErrorCode.quotaExceeded.rawValue, nil, nil, _) = message { true } else { false }
    }

    static func isACK(_ message: Message?) -> Bool {
        if case .ack = message { true } else { false }
    }

    static func stats(_ harness: HubHarness, _ session: Session) -> [String: UInt64] {
        harness.send(.stats(requestID: 99), from: session)
        guard case .statsReply(_, let stats) = harness.drain(session).last else { return [:] }
        return Dictionary(stats.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
    }

    @Test func storedRoomsAreBoundedAndRoomsThatExistAreNot() throws {
        let fixture = try Durable { $0.maxStoredRooms = 3 }
        defer { fixture.remove() }
        let harness = fixture.harness
        let session = harness.connect()
        for room in ["a", "b", "c"] { #expect(Self.isACK(Self.write(harness, session, room))) }
        let refused = Self.write(harness, session, "d")
        #expect(Self.isQuotaExceeded(refused), "\(String(describing: refused))")
        if case .reject(_, _, _, _, let message) = refused { #expect(message.contains("--max-stored-rooms")) }
        #expect(harness.hub.rooms[RoomName("d")]?.version ?? 0 == 0)
        // A SET_TTL would store the room too; a JOIN does not, and is answered.
        harness.send(.setTTL(requestID: 3, room: "e", seconds: 60), from: session)
        #expect(Self.isQuotaExceeded(harness.drain(session).last))
        #expect(harness.join(session, "d").contains { if case .snapshot = $0 { true } else { false } })
        // The rooms that exist take writes and TTLs as before.
        #expect(Self.isACK(Self.write(harness, session, "a", section: "t")))
        harness.send(.setTTL(requestID: 4, room: "b", seconds: 60), from: session)
        #expect(Self.isACK(harness.drain(session).last))
        let stats = Self.stats(harness, session)
        #expect(stats["rooms_stored"] == 3)
        #expect(stats["rooms_refused"] == 2)
        #expect(harness.hub.stats.roomsRefused[.storedRooms] == 2)
        // A room dropped frees its place.
        harness.send(.drop(requestID: 5, room: "c"), from: session)
        #expect(Self.isACK(harness.drain(session).last))
        #expect(Self.isACK(Self.write(harness, session, "d")))
    }

    @Test func theDataDirectorysSizeAndFreeSpaceStopNewRooms() throws {
        let fixture = try Durable { $0.maxDataBytes = 1 }
        defer { fixture.remove() }
        let harness = fixture.harness
        let session = harness.connect()
        // Before the first measurement nothing is known, and rooms are created.
        #expect(Self.isACK(Self.write(harness, session, "a")))
        harness.hub.maintainRooms(now: harness.clock.now)
        let usage = try #require(harness.hub.dataUsage)
        #expect(usage.bytes > 0)
        let refused = Self.write(harness, session, "b")
        #expect(Self.isQuotaExceeded(refused))
        if case .reject(_, _, _, _, let message) = refused { #expect(message.contains("--max-data-bytes")) }
        #expect(Self.isACK(Self.write(harness, session, "a", section: "t")))
        #expect(Self.stats(harness, session)["data_bytes"] == UInt64(usage.bytes))
        #expect(harness.hub.stats.roomsRefused[.dataBytes] == 1)

        // The free space kept for the rooms that exist, whatever --max-data-bytes says.
        let low = try Durable { $0.newRoomFreeBytes = Int.max }
        defer { low.remove() }
        let other = low.harness.connect()
        low.harness.hub.maintainRooms(now: low.harness.clock.now)
        #expect(Self.isQuotaExceeded(Self.write(low.harness, other, "a")))
        #expect(low.harness.hub.stats.roomsRefused[.freeSpace] == 1)
    }

    @Test func eachPrincipalCreatesAtMostItsRoomsPerMinute() {
        let harness = HubHarness { $0.roomCreationsPerMinute = 5 }
        let alice = harness.connect()
        for room in 0..<5 { #expect(Self.isACK(Self.write(harness, alice, "r\(room)"))) }
        let refused = Self.write(harness, alice, "r5")
        #expect(Self.isQuotaExceeded(refused))
        if case .reject(_, _, _, _, let message) = refused { #expect(message.contains("client test")) }
        // Its rooms take writes; another principal has its own allowance.
        #expect(Self.isACK(Self.write(harness, alice, "r0", section: "t")))
        let bob = harness.hub.openSession()
        harness.send(.hello(versions: [ProtocolVersion.current], clientName: "bob", credentials: []), from: bob)
        _ = harness.drain(bob)
        #expect(Self.isACK(Self.write(harness, bob, "b0")))
        // One creation comes back every 12 seconds.
        harness.clock.advance(by: .seconds(11))
        #expect(Self.isQuotaExceeded(Self.write(harness, alice, "r5")))
        harness.clock.advance(by: .seconds(2))
        #expect(Self.isACK(Self.write(harness, alice, "r5")))
        #expect(Self.isQuotaExceeded(Self.write(harness, alice, "r6")))
        #expect(harness.hub.stats.roomsRefused[.principal] == 3)
        // Full buckets are forgotten.
        harness.clock.advance(by: .seconds(61))
        harness.hub.maintainRooms(now: harness.clock.now)
        #expect(harness.hub.roomCreations.principalsTracked == 0)
    }

    /// Cluster mode: a room's first write counts against its principal's creations per minute
    /// (the log's stream limits bound the rooms); a principal out of them is refused once a
    /// read barrier has confirmed the room is new, and the rooms that exist take writes.
    @Test func inClusterModeEachPrincipalCreatesAtMostItsRoomsPerMinute() {
        let cluster = ClusterHarness(nodes: 2) { $0.roomCreationsPerMinute = 2 }
        let node = cluster.nodes[0]
        let session = node.connect()
        func write(_ room: String, _ section: String = "s", requestID: UInt64) -> Message? {
            node.mutate(session, room, [.appendSections([SnapshotElement(SnapshotIdentifier(section))])], requestID: requestID)
            cluster.settle()
            return node.drain(session).last { if case .diff = $0 { false } else { true } }
        }
        #expect(Self.isACK(write("a", requestID: 1)))
        #expect(Self.isACK(write("b", requestID: 2)))
        let refused = write("c", requestID: 3)
        #expect(Self.isQuotaExceeded(refused), "\(String(describing: refused))")
        #expect(Self.isACK(write("a", "t", requestID: 4)))
        #expect(cluster.log.records(of: "c").isEmpty)
        #expect(node.hub.stats.roomsRefused[.principal] == 1)
        // Another node's sessions are counted there.
        let other = cluster.nodes[1].connect()
        cluster.nodes[1].mutate(other, "c", [.appendSections([SnapshotElement("s")])], requestID: 5)
        cluster.settle()
        #expect(Self.isACK(cluster.nodes[1].drain(other).last { if case .diff = $0 { false } else { true } }))
    }
}
