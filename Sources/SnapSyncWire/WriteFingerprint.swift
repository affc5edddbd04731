import Crypto
package import SnapSyncModel

/// What a write asked for, in 8 bytes that are the same on every node and across restarts
/// (Protocol/CLUSTER.md §3, "Write fingerprints"): a room keeps it with the write's id and
/// compares it when another write reuses that id, a retry (the same) or a conflict
/// (`write_id_conflict`). The write records of the log, the checkpoints and the cluster's
/// stream keep it too, so that this holds after a restart and through any node.
///
/// The fingerprint is the first 8 bytes, big-endian, of SHA-256 over: the message type byte,
/// `expected_version` as the message encodes it (`opt<varint>`), then the write's content:
/// - MUTATE: its `ops` field (`list<op>`);
/// - REPLACE: the 32-byte digest of its snapshot (§4), which stands for the snapshot;
/// - REPLACE_SECTION: its `section` field (`bytes`), then its `items` field (`section_items`).
///
/// The encodings are the canonical ones of PROTOCOL.md, so two requests that decode to the same
/// values have the same fingerprint however a client encoded them. 64 bits: two different
/// writes under one id collide with a chance of 2⁻⁶⁴.
///
/// Each function encodes into `scratch` (emptied first, left holding what was hashed): the
/// daemon passes the buffer it encodes the write's DIFF into next, so a fingerprint allocates
/// nothing once that buffer has grown.
package enum WriteFingerprint {
    /// - Complexity: O(size of the ops).
    package static func mutate(_ ops: [SnapshotOperation], expectedVersion: UInt64?, scratch: inout [UInt8]) -> UInt64 {
        hash(.mutate, expectedVersion, &scratch) { $0.appendOperations(ops) }
    }

    /// - Complexity: O(1) given the digest.
    package static func replace(digest: SnapshotDigest, expectedVersion: UInt64?, scratch: inout [UInt8]) -> UInt64 {
        hash(.replace, expectedVersion, &scratch) { $0.append(contentsOf: digest.bytes) }
    }

    /// - Complexity: O(size of the items).
    package static func replaceSection(
        _ section: SnapshotIdentifier, _ items: SectionSnapshot, expectedVersion: UInt64?, scratch: inout [UInt8]
    ) -> UInt64 {
        hash(.replaceSection, expectedVersion, &scratch) { bytes in
            bytes.appendBytes(section.bytes)
            bytes.appendSectionItems(items)
        }
    }

    private static func hash(
        _ type: MessageType, _ expectedVersion: UInt64?, _ scratch: inout [UInt8], _ content: (inout [UInt8]) -> Void
    ) -> UInt64 {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(type.rawValue)
        scratch.appendOptionalVarint(expectedVersion)
        content(&scratch)
        var hasher = SHA256()
        scratch.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return hasher.finalize().withUnsafeBytes { raw in raw.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }
    }
}
