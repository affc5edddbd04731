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
        if case .snapshot(_, _, _, let version, _, _, _) = self { return version }
        return nil
    }

    /// (epoch, version) of an ACK, nil for anything else.
    var ackPosition: (epoch: UInt64, version: UInt64)? {
        if case .ack(_, let epoch, let version) = self { return (epoch, version) }
        return nil
    }
}

extension MemoryRoomLog {
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
