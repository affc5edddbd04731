// `import SnapSync` is all an app needs: the model (`RoomSnapshot`, `SnapshotOperation`,
// `SnapshotIdentifier`, ...) and the wire types the client's API names. The wire's other
// types (frames, messages, their coders) stay out of an app's namespace: names such as `Message`
// or `Sender` are an app's own, and an app never builds a frame.
@_exported public import SnapSyncModel
@_exported public import enum SnapSyncWire.ErrorCode
@_exported public import enum SnapSyncWire.PresenceChange
@_exported public import enum SnapSyncWire.PresenceDeparture
@_exported public import struct SnapSyncWire.PresenceMember
@_exported public import enum SnapSyncWire.ProtocolVersion
@_exported public import struct SnapSyncWire.RoomChain
@_exported public import struct SnapSyncWire.RoomPosition
@_exported public import struct SnapSyncWire.SectionCount
@_exported public import struct SnapSyncWire.WireLimits
