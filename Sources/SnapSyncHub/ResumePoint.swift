import SnapSyncWire

/// Where a JOIN resumes from (PROTOCOL.md §9): the replica's position and, from protocol
/// version 3 on, its chain there, which must be the room's for the JOIN to get a CATCHUP.
struct ResumePoint: Sendable {
    var position: RoomPosition
    /// Nil on versions 1 and 2; `RoomChain.unknown` from a client that does not know it.
    var chain: RoomChain?

    init(position: RoomPosition, chain: RoomChain? = nil) {
        self.position = position
        self.chain = chain
    }

    init(epoch: UInt64, version: UInt64, chain: RoomChain? = nil) {
        self.init(position: RoomPosition(epoch: epoch, version: version), chain: chain)
    }

    var epoch: UInt64 { position.epoch }
    var version: UInt64 { position.version }
}
