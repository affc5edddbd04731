// `import SnapSync` is all an app needs: the model (Snapshot, SnapshotOperation, Identifier, ...) and the
// wire's typed error codes (`ErrorCode`, named one-to-one in `SnapSyncError.Rejection`) come with it.
@_exported public import SnapSyncModel
@_exported public import SnapSyncWire
