// The names this release replaced, kept for one minor release so that an app's build says what
// to write instead (the compiler offers the fix) rather than failing. They go in 0.3.0; until
// then they still occupy the generic names, so an app that imports another module with a
// `Snapshot` or an `Identifier` writes the new name (or `SnapSync.` before the old one).

@available(*, deprecated, renamed: "RoomSnapshot")
public typealias Snapshot = RoomSnapshot
@available(*, deprecated, renamed: "SnapshotIdentifier")
public typealias Identifier = SnapshotIdentifier
@available(*, deprecated, renamed: "SnapshotPayload")
public typealias Payload = SnapshotPayload
@available(*, deprecated, renamed: "SnapshotLimits")
public typealias Limits = SnapshotLimits
@available(*, deprecated, renamed: "SnapshotOperation.Placement")
public typealias Placement = SnapshotOperation.Placement
@available(*, deprecated, renamed: "SnapshotOperation.UpdateKind")
public typealias UpdateKind = SnapshotOperation.UpdateKind
@available(*, deprecated, renamed: "BatchError.Violation")
public typealias Violation = BatchError.Violation
@available(*, deprecated, renamed: "BatchUpdates.Move")
public typealias Move = BatchUpdates.Move
@available(*, deprecated, renamed: "SnapSyncClient.Verification")
public typealias Verification = SnapSyncClient.Verification
