import Testing
import SnapSyncModel
import SnapSyncStore
import SnapSyncStoreTestSupport
import SnapSyncWire
@testable import SnapSyncHub

// Cluster mode in-process: hubs ("nodes") sharing one `MemoryRoomLog`, whose events and
// completions run only when a test pumps them, so that every interleaving is chosen.

struct ClusterHarness {
    /// The log as node 0 sees it; every node's log shares its records and its queue.
    let log: MemoryRoomLog
    let nodes: [HubHarness]

    init(nodes count: Int = 3, _ configure: (inout ServerConfiguration) -> Void = { _ in }) {
        let log = MemoryRoomLog()
        self.log = log
        nodes = (0..<count).map { index in
            HubHarness(log: index == 0 ? log : MemoryRoomLog(sharing: log), configure)
        }
    }

    /// Another node joining the cluster later.
    func addNode(_ configure: (inout ServerConfiguration) -> Void = { _ in }) -> HubHarness {
        HubHarness(log: MemoryRoomLog(sharing: log), configure)
    }

    /// Two nodes, a session on each that has joined "room" (their SNAPSHOTs read).
    static func aMemberOnEachOfTwoNodes(
        _ configure: (inout ServerConfiguration) -> Void = { _ in }
    ) -> (ClusterHarness, HubHarness, HubHarness, Session, Session) {
        let cluster = ClusterHarness(nodes: 2, configure)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1])
        let onA = a.connect(), onB = b.connect()
        a.join(onA, "room")
        b.join(onB, "room")
        cluster.settle()
        _ = (a.drain(onA), b.drain(onB))
        return (cluster, a, b, onA, onB)
    }

    /// Runs every queued event and completion of every node.
    func settle() {
        log.runAll()
    }

    /// The room's (epoch, version, digest) on every node that holds it.
    func positions(_ room: String) -> [(epoch: UInt64, version: UInt64, digest: SnapshotDigest)] {
        nodes.compactMap { node in
            node.hub.rooms[RoomName(room)].map { ($0.epoch, $0.version, $0.digest) }
        }
    }

    /// Every node holds the room, at one version (`version`, when given) with one digest and
    /// one chain, and its snapshot satisfies the model's invariants.
    func expectConverged(_ room: String, version: UInt64? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        let held = nodes.compactMap { $0.hub.rooms[RoomName(room)] }
        #expect(held.count == nodes.count, "\(nodes.count - held.count) nodes do not hold \(room)", sourceLocation: sourceLocation)
        #expect(Set(held.map(\.version)).count == 1 && Set(held.map(\.digest)).count == 1, sourceLocation: sourceLocation)
        #expect(Set(held.map(\.chain)).count == 1, "the nodes' chains differ", sourceLocation: sourceLocation)
        if let version { #expect(held.first?.version == version, sourceLocation: sourceLocation) }
        checkInvariants(room, sourceLocation: sourceLocation)
    }

    /// The room's snapshot satisfies the model's invariants on every node holding it.
    func checkInvariants(_ room: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for node in nodes where node.hub.rooms[RoomName(room)] != nil {
            node.checkInvariants(room, sourceLocation: sourceLocation)
        }
    }
}

extension Message {
    /// The version of a SNAPSHOT, nil for anything else.
    var snapshotVersion: UInt64? {
        if case .snapshot(_, _, _, let version, _, _, _, _) = self { return version }
        return nil
    }

    /// (epoch, version) of an ACK, nil for anything else.
    var ackPosition: (epoch: UInt64, version: UInt64)? {
        if case .ack(_, let epoch, let version) = self { return (epoch, version) }
        return nil
    }
}

extension MemoryRoomLog {
    /// How many writes each of the room's records carries, oldest first (0 for a tombstone).
    func writesPerRecord(of room: String) -> [Int] {
        records(of: room).map { record in
            switch record.entry {
            case .writes(let writes): writes.records.count
            case .write: 1
            case .tombstone, .chainedTombstone: 0
            }
        }
    }

    /// How many writes the room's records carry (a record may carry several).
    func writeCount(of room: String) -> Int {
        records(of: room).reduce(0) { count, record in
            switch record.entry {
            case .writes(let writes): count + writes.records.count
            case .write: count + 1
            case .tombstone, .chainedTombstone: count
            }
        }
    }
}

extension RoomLogEntry {
    /// "epoch/version" of a tombstone, chained or not; nil for writes.
    var endedPosition: String? {
        switch self {
        case .tombstone(let epoch, let version), .chainedTombstone(let epoch, let version, _): "\(epoch)/\(version)"
        case .writes, .write: nil
        }
    }
}
