import DequeModule
import Testing
import SnapSyncTestThreads
@testable import SnapSyncHub

@Suite(.unitTests) struct DequeRemoveFirstWhileTests {
    /// Random appends, removals (one, or a prefix by a predicate) and prepends, long enough to cross the compaction threshold many
    /// times: the queue always reads as a plain array used as a queue.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func behavesAsAnArray(seed: UInt64) {
        var state = seed
        func next(_ bound: UInt64) -> UInt64 {
            // xorshift64: deterministic, so a failure reproduces.
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state % bound
        }
        var queue = Deque<Int>()
        var model: [Int] = []
        for step in 0..<20_000 {
            switch next(11) {
            case 0..<5:
                queue.append(step)
                model.append(step)
            case 5..<8:
                #expect(queue.popFirst() == (model.isEmpty ? nil : model.removeFirst()))
            case 8..<10:
                // The leading elements not divisible by 3, handed over in order.
                var removed: [Int] = []
                queue.removeFirst(while: { $0 % 3 != 0 }) { removed.append($0) }
                let expected = Array(model.prefix { $0 % 3 != 0 })
                model.removeFirst(expected.count)
                #expect(removed == expected)
            default:
                queue.prepend(-step)
                model.insert(-step, at: 0)
            }
            if step % 97 == 0 { #expect(Array(queue) == model) }
            #expect(queue.count == model.count && queue.isEmpty == model.isEmpty && queue.first == model.first)
        }
        queue.removeAll()
        #expect(queue.isEmpty && queue.popFirst() == nil)
    }
}
