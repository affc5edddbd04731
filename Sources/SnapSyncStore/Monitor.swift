#if canImport(Glibc)
    internal import Glibc
#endif

/// A state guarded by a pthread mutex, with condition variables that threads wait on until the
/// state lets them go on: the queue between `BackgroundIO`'s owner and its worker thread. The
/// one hand-made mutex of SnapSync; the loop's mailbox and the client use NIOConcurrencyHelpers.
///
/// Why not a library type: `BackgroundIO` waits for predicates (work queued or shutdown asked
/// for, the queue below its capacity, a ticket finished), with one condition per kind of
/// waiter. NIOConcurrencyHelpers' `ConditionLock` waits only for its value to *equal* a given
/// one, on a single condition that every unlock broadcasts, and its `NIOLock` lends no mutex to
/// wait with; the standard library's `Mutex` has no condition at all. Every pthread return code
/// is checked, here only.
///
/// `Condition` names the condition variables (its raw values index them: 0, 1, ...).
final class Monitor<State, Condition: RawRepresentable & CaseIterable>: @unchecked Sendable where Condition.RawValue == Int {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let conditions: UnsafeMutablePointer<pthread_cond_t>
    private let conditionCount: Int
    /// Guarded by `mutex`: read and changed only inside `withLock`.
    private var state: State

    init(_ state: State) {
        self.state = state
        conditionCount = Condition.allCases.count
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        conditions = .allocate(capacity: conditionCount)
        conditions.initialize(repeating: pthread_cond_t(), count: conditionCount)
        Self.check(pthread_mutex_init(mutex, nil), "pthread_mutex_init")
        for index in 0..<conditionCount { Self.check(pthread_cond_init(conditions + index, nil), "pthread_cond_init") }
    }

    deinit {
        for index in 0..<conditionCount { Self.check(pthread_cond_destroy(conditions + index), "pthread_cond_destroy") }
        Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
        conditions.deinitialize(count: conditionCount)
        conditions.deallocate()
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` on the state with the mutex held. Keep it short: no blocking, no call out.
    func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        return try body(&state)
    }

    /// Waits on `condition`, the mutex released meanwhile, until `ready` holds of the state,
    /// then runs `body` on it with the mutex held (`withLock` at once if `ready` holds already).
    func withLock<R>(whenever condition: Condition, _ ready: (State) -> Bool, _ body: (inout State) throws -> R) rethrows -> R {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        while !ready(state) { Self.check(pthread_cond_wait(self.condition(condition), mutex), "pthread_cond_wait") }
        return try body(&state)
    }

    /// Wakes one thread waiting on `condition` (`pthread_cond_signal`). Called inside `withLock`
    /// after the change the waiter waits for, so that no wake-up can come between its check and
    /// its wait.
    func signal(_ condition: Condition) {
        Self.check(pthread_cond_signal(self.condition(condition)), "pthread_cond_signal")
    }

    /// Wakes every thread waiting on `condition` (`pthread_cond_broadcast`); as `signal`.
    func broadcast(_ condition: Condition) {
        Self.check(pthread_cond_broadcast(self.condition(condition)), "pthread_cond_broadcast")
    }

    private func condition(_ condition: Condition) -> UnsafeMutablePointer<pthread_cond_t> {
        precondition((0..<conditionCount).contains(condition.rawValue), "condition \(condition) out of 0..<\(conditionCount)")
        return conditions + condition.rawValue
    }

    /// Every pthread call here fails only on misuse (an uninitialized or destroyed object, a
    /// mutex not held): a bug, so a precondition.
    private static func check(_ result: Int32, _ function: StaticString) {
        precondition(result == 0, "\(function) failed: \(result)")
    }
}
