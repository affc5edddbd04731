#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#endif

/// A value guarded by a pthread mutex, for state that threads outside Swift concurrency (NIO's
/// event loops) and any task read synchronously: a replica's snapshot, a connection's channel
/// and close reason. `Synchronization.Mutex` would do, but it needs macOS 15 / iOS 18 and the package
/// supports macOS 13 / iOS 16.
///
/// The closure runs with the lock held: keep it short and never `await` or call back out of it.
final class Locked<State> {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var state: State

    init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}

extension Locked where State: Sendable {
    var value: State { withLock { $0 } }
}

// @unchecked: every access to `state` goes through `withLock`, which holds `mutex`; only a
// Sendable state may cross threads this way.
extension Locked: @unchecked Sendable where State: Sendable {}
