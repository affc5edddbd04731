package import NIOConcurrencyHelpers

/// Hands `Delivery`s from other threads (libnats's delivery threads, in cluster mode) to the
/// thread that runs an `EventLoop`: a locked FIFO plus one `CallbackEvent`, made active by `post`
/// from any thread; its callback drains the FIFO on the loop thread.
///
/// Making an event active from another thread needs a loop made with locking
/// (`EventLoop(locking: true)` after `EventLoop.enableThreadedAccess()`). One wake-up serves any
/// number of posts between two loop passes: `post` is O(1), a drain O(deliveries).
///
/// The class is inlinable so that a mailbox of a concrete delivery type (the cluster's
/// `LoopMailbox<LoopDelivery>`) is specialized in the module that names the type: a post and a
/// drain, once per message libnats delivers, then cost no generic indirection.
///
/// Thread-safety: `post` from any thread; everything else (`init`, the deliveries, `close`) on the
/// loop thread. The lock (NIOConcurrencyHelpers' `NIOLock`) guards `queue`, `armed` and `event`.
package final class LoopMailbox<Delivery: Sendable>: @unchecked Sendable {
    @usableFromInline let lock = NIOLock()
    @usableFromInline var queue: [Delivery] = []
    /// Whether the event is active already: a second post needs no second activation.
    @usableFromInline var armed = false
    @usableFromInline var event: CallbackEvent?
    /// The loop thread's only.
    @usableFromInline let deliver: (Delivery) -> Void

    /// A mailbox whose deliveries run `deliver` on `loop`'s thread, at `priority`.
    @inlinable
    package init(loop: EventLoop, priority: EventPriority, deliver: @escaping (Delivery) -> Void) throws(EventLoopError) {
        self.deliver = deliver
        // Unowned: the mailbox owns the event and frees it (`close`, deinit) before it goes.
        event = try CallbackEvent(loop: loop, priority: priority) { [unowned self] in self.drain() }
    }

    deinit { close() }

    /// Any thread: queues `delivery` and wakes the loop if it is not woken already.
    @inlinable
    package func post(_ delivery: Delivery) {
        lock.withLock {
            queue.append(delivery)
            let wake = !armed
            armed = true
            // Under the lock, so that `close()` cannot free the event meanwhile.
            if wake { event?.activate() }
        }
    }

    /// Loop thread: everything posted so far, in order.
    @inlinable
    func drain() {
        let batch = lock.withLock {
            let batch = queue
            queue.removeAll(keepingCapacity: true)
            armed = false
            return batch
        }
        for delivery in batch { deliver(delivery) }
    }

    /// Loop thread: frees the event; later posts are queued and never delivered.
    @inlinable
    package func close() {
        let event = lock.withLock {
            let event = self.event
            self.event = nil
            return event
        }
        event?.close()
    }
}
