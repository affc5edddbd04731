/// The opaque content attached to a section or an item: what a cell displays.
///
/// SnapSync never looks inside. Identity is the `SnapshotIdentifier`; the payload is content, so a
/// payload change is an update (reload or reconfigure), never a delete and insert.
/// An empty payload means "no payload".
public struct SnapshotPayload: Hashable, Sendable {
    public var bytes: [UInt8]

    @inlinable public init(_ bytes: [UInt8] = []) { self.bytes = bytes }
    @inlinable public init(_ string: String) { self.bytes = Array(string.utf8) }

    public static let empty = SnapshotPayload()

    @inlinable public var count: Int { bytes.count }
    @inlinable public var isEmpty: Bool { bytes.isEmpty }
    public var string: String? { String(validating: bytes, as: UTF8.self) }

    /// The count, then the bytes in one call, as `SnapshotIdentifier` does: the synthesized hash fed
    /// them one by one, 10× slower, and a write id's fingerprint hashes every payload of its
    /// MUTATE on the loop (16 MiB: 70 ms, now 7 ms, `swiftc -O`). O(count).
    @inlinable public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// `"done at \(time)"` is a payload too: the interpolated text's UTF-8 bytes.
extension SnapshotPayload: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) { self.init(value) }
    public init(stringInterpolation: DefaultStringInterpolation) { self.init(String(stringInterpolation: stringInterpolation)) }
}

/// An identifier with its payload: what append and insert operations carry.
public struct SnapshotElement: Hashable, Sendable {
    public var id: SnapshotIdentifier
    public var payload: SnapshotPayload

    @inlinable public init(_ id: SnapshotIdentifier, payload: SnapshotPayload = .empty) {
        self.id = id
        self.payload = payload
    }
}

/// `"card-\(n)"` is an element with that identifier and no payload.
extension SnapshotElement: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) { self.init(SnapshotIdentifier(value)) }
    public init(stringInterpolation: DefaultStringInterpolation) { self.init(SnapshotIdentifier(String(stringInterpolation: stringInterpolation))) }
}
