package import SnapSyncModel

/// A snapshot's canonical encoding (PROTOCOL.md §4) on its own, as the store keeps it in its
/// checkpoints: read by the same code as the wire's snapshot fields (`snapshotStructure`), so
/// that a checkpoint and a SNAPSHOT accept exactly the same encodings (a `levels` part of only
/// zeros, for one, is refused by both).
package enum CanonicalSnapshot {
    /// The sections with their items and the `levels` part (nil when flat) of the encoding that
    /// is exactly `bytes`, every structural rule checked; the content (duplicates, limits) is
    /// the caller's to check as it builds the snapshot.
    /// - Throws: `malformed_frame` naming what is wrong, as for a SNAPSHOT's field.
    /// - Complexity: O(bytes).
    package static func structure(_ bytes: UnsafeBufferPointer<UInt8>) throws(WireError) -> (
        sections: [(section: SnapshotElement, items: [SnapshotElement])], levels: [Int]?
    ) {
        var reader = ByteReader(bytes, message: .snapshot, version: ProtocolVersion.current)
        let structure = try reader.snapshotStructure()
        guard reader.isAtEnd else { throw reader.fail("snapshot", "\(reader.remaining) bytes after the snapshot") }
        return structure
    }
}
