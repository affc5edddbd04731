package import NIOConcurrencyHelpers

/// Hands `Delivery`s from other threads (libnats's delivery threads in cluster mode, the
/// `LoopWorker`'s) to the thread that runs an `EventLoop`: a locked FIFO plus one wake-up, made
/// by `post` from any thread, whose callback drains the FIFO on the loop thread.
///
/// The wake-up (`Waking`) is a `CallbackEvent` made active, which needs a loop made with locking
/// (`EventLoop(locking: true)` after `EventLoop.enableThreadedAccess()`), or a pipe the loop
/// reads (`DescriptorWake`), which works on any loop. One wake-up serves any number of posts
/// between two loop passes: `post` is O(1), a drain O(deliveries).
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
    @usableFromInline var descriptorWake: DescriptorWake?
    /// The loop thread's only.
    @usableFromInline let deliver: (Delivery) -> Void

    /// How a post wakes the loop.
    package enum Waking {
        /// `event_active` on a `CallbackEvent`: the loop must be made with locking.
        case activation
        /// A pipe the loop reads (`DescriptorWake`): any loop.
        case descriptor
    }

    /// A mailbox whose deliveries run `deliver` on `loop`'s thread, at `priority`.
    @inlinable
    package init(
        loop: EventLoop, priority: EventPriority, waking: Waking = .activation, deliver: @escaping (Delivery) -> Void
    ) throws(EventLoopError) {
        self.deliver = deliver
        // Unowned: the mailbox owns the wake-up and frees it (`close`, deinit) before it goes.
        switch waking {
        case .activation: event = try CallbackEvent(loop: loop, priority: priority) { [unowned self] in self.drain() }
        case .descriptor: descriptorWake = try DescriptorWake(loop: loop, priority: priority) { [unowned self] in self.drain() }
        }
    }

    deinit { close() }

    /// Any thread: queues `delivery` and wakes the loop if it is not woken already.
    @inlinable
    package func post(_ delivery: Delivery) {
        lock.withLock {
            queue.append(delivery)
            let wake = !armed
            armed = true
            // Under the lock, so that `close()` cannot free the wake-up meanwhile.
            if wake {
                event?.activate()
                descriptorWake?.signal()
            }
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

    /// Loop thread: frees the wake-up; later posts are queued and never delivered.
    @inlinable
    package func close() {
        let (event, descriptorWake) = lock.withLock {
            let taken = (self.event, self.descriptorWake)
            self.event = nil
            self.descriptorWake = nil
            return taken
        }
        event?.close()
        descriptorWake?.close()
    }
}
