package import DequeModule

extension Deque {
    /// Removes the leading elements for which `isRemoved` holds, oldest first, handing each to
    /// `removed`. Each element is tested where it lies (`self[startIndex]`), not copied out
    /// first: the write-ID window drops its expired IDs this way on every write.
    /// - Complexity: O(elements removed + 1).
    package mutating func removeFirst(while isRemoved: (Element) -> Bool, _ removed: (Element) -> Void) {
        while !isEmpty, isRemoved(self[startIndex]) {
            removed(removeFirst())
        }
    }
}
