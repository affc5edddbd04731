/// A nats-server's version, as its INFO line gives it (`"version":"2.10.23"`), and whether
/// JetStream at that version is known to lose acknowledged writes (docs/cluster.md, "Which
/// nats-server").
///
/// Ordered as semantic versions are: by major, minor and patch, then a pre-release
/// (`2.11.0-RC.1`) before its release; build metadata (`+...`) is ignored. Pure: no I/O.
public struct NATSServerVersion: Comparable, Sendable, CustomStringConvertible {
    public let major: Int
    public let minor: Int
    public let patch: Int
    /// What follows the first `-` (`RC.1`), or nil for a release.
    public let preRelease: String?

    public init(major: Int, minor: Int, patch: Int, preRelease: String? = nil) {
        self.major = major
        self.minor = minor
        self.patch = patch
        self.preRelease = preRelease
    }

    /// Parses `2.10.23`, `v2.10.23`, `2.11.0-RC.1`, `2.10.23+build`, and `2.11` (patch 0);
    /// nil for anything else (no number, a negative or non-numeric part, more than three parts).
    public init?(_ text: String) {
        var rest = Substring(text)
        if rest.first == "v" { rest = rest.dropFirst() }
        if let plus = rest.firstIndex(of: "+") { rest = rest[..<plus] }
        var preRelease: String?
        if let dash = rest.firstIndex(of: "-") {
            preRelease = String(rest[rest.index(after: dash)...])
            rest = rest[..<dash]
            if preRelease?.isEmpty == true { return nil }
        }
        let parts = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count) else { return nil }
        var numbers: [Int] = []
        for part in parts {
            guard !part.isEmpty, part.allSatisfy(\.isASCII), part.allSatisfy(\.isNumber), let number = Int(part) else { return nil }
            numbers.append(number)
        }
        self.init(major: numbers[0], minor: numbers[1], patch: numbers.count == 3 ? numbers[2] : 0, preRelease: preRelease)
    }

    public var description: String {
        "\(major).\(minor).\(patch)" + (preRelease.map { "-\($0)" } ?? "")
    }

    public static func < (a: NATSServerVersion, b: NATSServerVersion) -> Bool {
        if (a.major, a.minor, a.patch) != (b.major, b.minor, b.patch) {
            return (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch)
        }
        switch (a.preRelease, b.preRelease) {
        case (nil, _): return false
        case (.some, nil): return true
        // Two pre-releases of one version: an order good enough to be total (RC.1 < RC.2).
        case (.some(let x), .some(let y)): return x.lexicographicallyPrecedes(y)
        }
    }

    /// The oldest nats-server whose JetStream has no known bug losing acknowledged writes of a
    /// healthy cluster: Jepsen's analysis of NATS 2.10.22 (December 2025) found writes lost
    /// when server processes crashed, fixed in 2.10.23.
    public static let minimumSafe = NATSServerVersion(major: 2, minor: 10, patch: 23)

    /// Why JetStream at this version is known to lose acknowledged writes, or nil when it is
    /// at least `minimumSafe`. A pre-release of 2.10.23 is refused: it is not the fix's release.
    public var knownDataLoss: String? {
        guard self < Self.minimumSafe else { return nil }
        var reason = "JetStream before \(Self.minimumSafe) can lose acknowledged writes when server processes crash (Jepsen, NATS 2.10.22; fixed in 2.10.23)"
        if major < 2 || (major == 2 && minor < 10) {
            // What this project saw of 2.9 itself (docs/cluster.md).
            reason += "; 2.9 also stores concurrent publishes that expect the same last sequence, and under partitions its stream leaders forked rooms"
        }
        return reason
    }
}
