/// Where a replica stands in its room's history: the room's `epoch` (a fresh random number each
/// time the room is created) and the `version` its snapshot is at (0 for a new room, +1 per
/// applied batch). Versions of different epochs are unrelated.
public struct RoomPosition: Hashable, Sendable, CustomStringConvertible {
    public var epoch: UInt64
    public var version: UInt64

    public init(epoch: UInt64, version: UInt64) {
        self.epoch = epoch
        self.version = version
    }

    public var description: String { "v\(version) (epoch \(epoch))" }
}
