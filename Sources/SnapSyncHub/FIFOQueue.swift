/// A first-in first-out queue over an array and the index of its head, for queues consumed from
/// the front while they grow at the back (a room's remembered write ids, the writes waiting for
/// the cluster's log, the JOINs waiting for a read barrier).
///
/// `removeFirst` only moves the head; the array drops the removed prefix when the queue empties,
/// or once the prefix is at least 64 entries and half the array. So each element is moved at
/// most once more than it is appended: `append` and `removeFirst` are amortized O(1), and the
/// array holds at most twice the queue (plus 64).
package struct FIFOQueue<Element> {
    private var storage: [Element] = []
    private var head = 0

    var count: Int { storage.count - head }
    package var isEmpty: Bool { head == storage.count }
    var first: Element? { isEmpty ? nil : storage[head] }
    /// The queue, oldest first.
    var elements: ArraySlice<Element> { storage[head...] }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    /// Puts `element` back in front: O(1) after a `removeFirst`, else O(count).
    mutating func prepend(_ element: Element) {
        if head > 0 {
            head -= 1
            storage[head] = element
        } else {
            storage.insert(element, at: 0)
        }
    }

    @discardableResult
    mutating func removeFirst() -> Element? {
        guard !isEmpty else { return nil }
        let element = storage[head]
        head += 1
        compact()
        return element
    }

    /// Removes the leading elements for which `isRemoved` holds, oldest first, handing each to
    /// `removed`. The elements are looked at in place, not copied out, which matters on the write
    /// path (the write-id window drops its expired ids on every write).
    /// - Complexity: O(elements removed + 1), amortized.
    mutating func removeFirst(while isRemoved: (Element) -> Bool, _ removed: (Element) -> Void) {
        while head < storage.count, isRemoved(storage[head]) {
            removed(storage[head])
            head += 1
        }
        compact()
    }

    private mutating func compact() {
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeSubrange(0..<head)
            head = 0
        }
    }

    package mutating func removeAll() {
        storage.removeAll(keepingCapacity: true)
        head = 0
    }
}
