/// A fixed-capacity buffer of plain values for the differ's inner loops: `append` is a store
/// and an increment, where `Array.append` calls the runtime's uniqueness check every time
/// (`swift_isUniquelyReferenced_nonNull_native`, through the PLT: 13% of a 100,000-item diff's
/// time when the differ appended to arrays). Noncopyable, so that the one owner frees it.
///
/// The capacity is fixed when it is made or `reset`, from a bound the caller knows (a section's
/// item count); appending past it is a programming error and traps.
struct ScratchBuffer<Element: BitwiseCopyable>: ~Copyable {
    private var base: UnsafeMutablePointer<Element>
    private(set) var capacity: Int
    private(set) var count = 0

    /// Room for `capacity` elements, none yet.
    init(capacity: Int) {
        self.capacity = Swift.max(capacity, 1)
        base = .allocate(capacity: self.capacity)
    }

    /// `count` copies of `value`.
    init(repeating value: Element, count: Int) {
        self.init(capacity: count)
        base.initialize(repeating: value, count: count)
        self.count = count
    }

    deinit { base.deallocate() }

    /// Empties the buffer, with room for at least `capacity` elements.
    mutating func reset(capacity needed: Int) {
        count = 0
        guard needed > capacity else { return }
        base.deallocate()
        capacity = needed
        base = .allocate(capacity: needed)
    }

    @inline(__always) mutating func append(_ element: Element) {
        precondition(count < capacity, "ScratchBuffer: appending past its capacity")
        (base + count).initialize(to: element)
        count += 1
    }

    /// An element; `index` below `count` (or, for a buffer made `repeating`, its count). Setting
    /// writes through the storage, as an `UnsafeMutablePointer` does, so a `let` buffer's
    /// elements can change.
    @inline(__always) subscript(index: Int) -> Element {
        get { base[index] }
        nonmutating set { base[index] = newValue }
    }

    /// The elements, valid until the next `reset` or the end of the buffer.
    var elements: UnsafeBufferPointer<Element> { UnsafeBufferPointer(start: base, count: count) }
}
