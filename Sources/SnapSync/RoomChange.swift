import SnapSyncWire

/// One change of a replica, as delivered by `RoomReplica.changes`.
public struct RoomChange: Sendable {
    public enum Kind: Hashable, Sendable {
        /// The first change of every `changes` stream: the replica's snapshot when the stream
        /// was made (after `join`, its first snapshot); everything is an insert.
        case initial
        /// One batch another client (or this one) applied: one DIFF.
        case diff
        /// After a reconnect, the batches the replica missed, served from the room's history
        /// (CATCHUP and its DIFFs), reported as one change.
        case catchUp
        /// The replica was replaced by a fresh snapshot: the missed history was too long, or the
        /// replica could not be trusted any more (see `ResyncReason`). The updates are the
        /// difference between the two snapshots.
        case resync(ResyncReason)
        /// This viewer expanded or collapsed items of an outline (`RoomReplica.expand(_:)`): the
        /// snapshot and the position did not change, the visible rows did.
        case expansion
    }

    public var kind: Kind
    public var room: String
    /// The position before the change; `nil` for `.initial`.
    public var previousPosition: RoomPosition?
    /// The position after the change.
    public var position: RoomPosition
    /// The operations applied, in order (all of a catch-up's batches); empty for `.initial` and
    /// `.resync`, which replace the snapshot.
    public var operations: [SnapshotOperation]
    /// The replica's snapshot after the change.
    public var snapshot: RoomSnapshot
    /// The change resolved to index paths against the previous and this snapshot's visible rows.
    public var updates: BatchUpdates
    /// The rows `updates` counts: `snapshot` without the items under collapsed items of an
    /// outline (`OutlineExpansion.visibleSnapshot`); `snapshot` itself for a flat room.
    public var visibleSnapshot: RoomSnapshot
    /// This viewer's expansion state after the change (`RoomReplica.expansion`): which items'
    /// children `visibleSnapshot` shows. What a section snapshot route needs besides the
    /// hierarchy (`DiffableSectionUpdate`).
    public var expansion = OutlineExpansion()

    public init(
        kind: Kind, room: String, previousPosition: RoomPosition?, position: RoomPosition,
        operations: [SnapshotOperation], snapshot: RoomSnapshot, updates: BatchUpdates
    ) {
        self.kind = kind
        self.room = room
        self.previousPosition = previousPosition
        self.position = position
        self.operations = operations
        self.snapshot = snapshot
        self.updates = updates
        visibleSnapshot = snapshot
    }

    /// The room's version after the change.
    public var version: UInt64 { position.version }
}

/// Why a replica was replaced by a fresh snapshot.
public enum ResyncReason: Hashable, Sendable, CustomStringConvertible {
    /// On resume, the server no longer had the versions the replica missed (SNAPSHOT reason
    /// `resync`), or the room was recreated under a new epoch.
    case historyUnavailable
    /// A SNAPSHOT's digest did not match its content: the client asked again.
    case digestMismatch
    /// A DIFF did not apply cleanly to the replica.
    case diffFailed(BatchError)
    /// A DIFF's version was not the replica's + 1, or its epoch was not the replica's.
    case outOfSequence(expected: RoomPosition, received: RoomPosition)
    /// A DIFF's chain (protocol version 3, PROTOCOL.md §9) was not the one the replica's chain
    /// and that DIFF lead to: the replica does not hold the room's state (the server, a relay
    /// or this replica went wrong), so it is dropped and the room joined afresh.
    case diverged(expected: RoomChain, received: RoomChain)
    /// `SnapSyncClient.verify(_:)`: the room's digest at the replica's position (`expected`, the
    /// server's) is not the replica's own (`computed`): the replica's state is wrong although
    /// the DIFFs that built it were right (a fault of this process or of the client's apply).
    case corrupted(expected: SnapshotDigest, computed: SnapshotDigest)

    public var description: String {
        switch self {
        case .historyUnavailable: "the missed versions are no longer in the room's history"
        case .digestMismatch: "a snapshot's digest did not match its content"
        case .diffFailed(let error): "a diff did not apply: \(error)"
        case .outOfSequence(let expected, let received): "expected \(expected), received \(received)"
        case .diverged(let expected, let received): "the replica diverged from the room: its chain leads to \(expected), the server's DIFF names \(received)"
        case .corrupted(let expected, let computed): "the replica's state is not the room's: the room's digest is \(expected), the replica's \(computed)"
        }
    }
}
