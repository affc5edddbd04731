internal import CLibevent

#if canImport(Glibc)
    internal import Glibc
#endif

/// What libnats's threads hand to the loop thread.
enum LoopDelivery: Sendable {
    /// The outcome of one asynchronous publish, by its message id.
    case published(messageID: String, Result<PublishAck, NATSError>)
    /// A message of one of the connection's subscriptions.
    case inbox(InboxMessage)
    /// The connection was lost (nil) or made again to the server at this URL.
    case connection(reconnectedTo: String?)
}

/// Hands `LoopDelivery`s from libnats's delivery threads to the thread that runs the daemon's
/// libevent loop: a mutex-guarded FIFO plus one user event, made active (`event_active`) by
/// `post` from any thread; its callback drains the FIFO on the loop thread.
///
/// `event_active` from another thread needs a base with locking on, which cluster mode has
/// anyway (`NATSConnection.prepareLibevent()`, before the base is made). One wake-up serves any
/// number of posts between two loop passes: `post` is O(1), a drain O(deliveries).
///
/// Thread-safety: `post` from any thread; everything else (`init`, the delivery callback,
/// `close`) on the loop thread. The mutex guards `queue` and `armed` only.
final class LoopMailbox: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var queue: [LoopDelivery] = []
    /// Whether the event is active already: a second post needs no second `event_active`.
    private var armed = false
    private var event: OpaquePointer?
    /// The loop thread's only.
    private let deliver: (LoopDelivery) -> Void

    init(base: OpaquePointer, deliver: @escaping (LoopDelivery) -> Void) throws(NATSError) {
        self.deliver = deliver
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard
            let event = event_new(
                base, -1, 0,
                { _, _, context in
                    Unmanaged<LoopMailbox>.fromOpaque(context!).takeUnretainedValue().drain()
                }, context)
        else {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
            throw NATSError(operation: "event_new", identifier: "loop mailbox", code: .status(0), text: "libevent could not make an event")
        }
        self.event = event
    }

    deinit {
        close()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Any thread: queues `delivery` and wakes the loop if it is not woken already.
    func post(_ delivery: LoopDelivery) {
        pthread_mutex_lock(mutex)
        queue.append(delivery)
        let wake = !armed && event != nil
        armed = true
        if wake { event_active(event, 0, 0) }
        pthread_mutex_unlock(mutex)
    }

    /// Loop thread: everything posted so far, in order.
    private func drain() {
        pthread_mutex_lock(mutex)
        let batch = queue
        queue.removeAll(keepingCapacity: true)
        armed = false
        pthread_mutex_unlock(mutex)
        for delivery in batch { deliver(delivery) }
    }

    /// Loop thread: frees the event; later posts are queued and never delivered.
    func close() {
        pthread_mutex_lock(mutex)
        let event = self.event
        self.event = nil
        pthread_mutex_unlock(mutex)
        if let event { event_free(event) }
    }
}
