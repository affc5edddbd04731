import NIOConcurrencyHelpers

// Prefetching for windowed lists: as the rows a list is about to show (prefetched, or displayed)
// come near an end of a section's window that is not the end of the room's section, the window
// grows there (`WindowedReplica.extend(section:by:at:)`). The decision is platform-neutral and
// pure (`WindowPrefetchPolicy`); `WindowPrefetcher` runs the extensions, one per section and end
// at a time; the UIKit conformance (`WindowPrefetchingDataSource`, CollectionViewAdapters+UIKit.swift)
// only hands it index paths.

/// When a list backed by a `WindowedReplica` asks for more rows, and how many.
public struct WindowPrefetchPolicy: Hashable, Sendable {
    /// How near (in rows) to an open end of its section's window a prefetched or displayed row
    /// must be to extend the window there: the last `distance` rows (or, with
    /// `extendsAtStart`, the first).
    public var distance: Int
    /// The rows each extension adds.
    public var batchSize: Int
    /// Whether rows near the start of a window extend it backwards too (a list scrolled upwards
    /// from a `last` or `around` window); else only after its last row.
    public var extendsAtStart: Bool

    public init(distance: Int = 20, batchSize: Int = 100, extendsAtStart: Bool = false) {
        self.distance = distance
        self.batchSize = batchSize
        self.extendsAtStart = extendsAtStart
    }

    /// The extensions `indexPaths` (rows being prefetched or displayed) call for: for each
    /// section with such a row within `distance` of an end of its window that is not the end of
    /// the room's section (`WindowSectionRows.reachesEnd`), while the room's section holds items
    /// the window does not. `rows` gives the section at an index (`WindowedReplica.rows(inSection:)`).
    /// - Complexity: O(index paths + sections named)
    public func extensions(for indexPaths: [ItemIndexPath], rows: (Int) -> WindowSectionRows?) -> [WindowExtension] {
        var spans: [Int: (first: Int, last: Int)] = [:]
        for path in indexPaths {
            let span = spans[path.section] ?? (path.item, path.item)
            spans[path.section] = (min(span.first, path.item), max(span.last, path.item))
        }
        var result: [WindowExtension] = []
        for (index, span) in spans.sorted(by: { $0.key < $1.key }) {
            guard batchSize > 0, let section = rows(index), section.window != nil, section.hasMore else { continue }
            if !section.reachesEnd && span.last >= section.rows - distance {
                result.append(WindowExtension(section: section.section, edge: .end, rows: batchSize))
            }
            if extendsAtStart && !section.reachesStart && span.first < distance {
                result.append(WindowExtension(section: section.section, edge: .start, rows: batchSize))
            }
        }
        return result
    }
}

/// One extension a `WindowPrefetchPolicy` decided: `rows` more rows of `section` at `edge`.
public struct WindowExtension: Hashable, Sendable, CustomStringConvertible {
    public var section: SnapshotIdentifier
    public var edge: WindowEdge
    public var rows: Int

    public init(section: SnapshotIdentifier, edge: WindowEdge, rows: Int) {
        self.section = section
        self.edge = edge
        self.rows = rows
    }

    public var description: String { "\(rows) rows at the \(edge == .end ? "end" : "start") of \(section)" }
}

/// Extends a windowed replica's window as a list scrolls towards its ends: hand it the index
/// paths a list prefetches (`UICollectionViewDataSourcePrefetching`, through
/// `WindowPrefetchingDataSource` on UIKit) or displays (`collectionView(_:willDisplay:forItemAt:)`).
/// Each extension runs in a task of its own; while one runs for a section's end, that end is
/// not extended again (the next rows prefetched after its answer decide). An extension that
/// fails is kept in `lastError` and tried again by the next rows that call for it.
///
/// Thread-safe: call it from the main thread, or from anywhere.
public final class WindowPrefetcher: Sendable {
    public let replica: WindowedReplica
    public let policy: WindowPrefetchPolicy

    private struct Key: Hashable {
        var section: SnapshotIdentifier
        var edge: WindowEdge
    }
    private struct Shared {
        var running: Set<Key> = []
        var lastError: SnapSyncError?
    }
    private let shared = NIOLockedValueBox(Shared())
    private let run: @Sendable (WindowExtension) async -> SnapSyncError?

    public convenience init(_ replica: WindowedReplica, policy: WindowPrefetchPolicy = WindowPrefetchPolicy()) {
        self.init(replica, policy: policy) { [weak replica] extension_ in
            guard let replica else { return .closed }
            do throws(SnapSyncError) {
                try await replica.extend(section: extension_.section, by: extension_.rows, at: extension_.edge)
                return nil
            } catch {
                return error
            }
        }
    }

    /// A prefetcher whose extensions `run` performs (tests).
    init(_ replica: WindowedReplica, policy: WindowPrefetchPolicy, run: @escaping @Sendable (WindowExtension) async -> SnapSyncError?) {
        self.replica = replica
        self.policy = policy
        self.run = run
    }

    /// Rows are about to be shown (prefetched or displayed): starts the extensions they call
    /// for, except those already running, and returns them.
    @discardableResult
    public func prefetch(_ indexPaths: [ItemIndexPath]) -> [WindowExtension] {
        let policy = policy
        let wanted = replica.broadcast.read { state in
            policy.extensions(for: indexPaths) { index in
                state.rows.positions.sectionIdentifier(for: index).map { WindowSectionRows(state, section: $0, index: index) }
            }
        }
        let started = shared.withLockedValue { shared in
            wanted.filter { shared.running.insert(Key(section: $0.section, edge: $0.edge)).inserted }
        }
        for extension_ in started {
            Task { [self] in
                let error = await run(extension_)
                shared.withLockedValue { shared in
                    shared.running.remove(Key(section: extension_.section, edge: extension_.edge))
                    if let error { shared.lastError = error }
                }
            }
        }
        return started
    }

    /// A row is displayed: `prefetch([indexPath])`.
    @discardableResult
    public func displaying(_ indexPath: ItemIndexPath) -> [WindowExtension] {
        prefetch([indexPath])
    }

    /// Whether an extension is running.
    public var isExtending: Bool { shared.withLockedValue { !$0.running.isEmpty } }

    /// The error of the last extension that failed, if any.
    public var lastError: SnapSyncError? { shared.withLockedValue { $0.lastError } }
}
