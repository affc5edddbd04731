/// What a grant lets a connection do in the rooms it matches (docs/auth.md). The rights are
/// independent: `admin` does not imply `read` or `write`.
public enum Right: String, Sendable, Hashable, CaseIterable, Codable {
    /// JOIN a room and receive its DIFFs.
    case read
    /// MUTATE and REPLACE.
    case write
    /// Room deletion and STATS.
    case admin
}
