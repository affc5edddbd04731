/// The position of an item: its section's index and its index within that section, as in
/// UIKit's `IndexPath(item:section:)`.
///
/// A plain struct rather than Foundation's `IndexPath`, so that the library needs no Foundation
/// on Linux; `ItemIndexPath+Foundation.swift` converts where Foundation exists. Ordered by
/// section, then item: the order UIKit processes inserts in.
public struct ItemIndexPath: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var section: Int
    public var item: Int

    @inlinable public init(item: Int, section: Int) {
        self.section = section
        self.item = item
    }

    @inlinable public static func < (lhs: ItemIndexPath, rhs: ItemIndexPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    public var description: String { "[\(section), \(item)]" }
}

extension BatchUpdates {
    /// A move in a batch update: `from` is a position before the update, `to` one after it.
    public struct Move<Position: Hashable & Sendable>: Hashable, Sendable {
        public var from: Position
        public var to: Position

        @inlinable public init(from: Position, to: Position) {
            self.from = from
            self.to = to
        }
    }
}

extension BatchUpdates.Move: CustomStringConvertible {
    public var description: String { "\(from) → \(to)" }
}
