/// An `Event` that owns its callback, a closure, for owners that have no C callback and context
/// of their own to give `EventLoop.makeEvent` (the cluster's room log, `LoopMailbox`): `fire`
/// runs on the loop thread every `interval` when one is given (a persistent timer), and on the
/// loop's next pass after `activate()`.
///
/// Thread-safety: the loop thread's, but for `activate()` from another thread on a loop made with
/// locking, as long as the caller keeps it from racing `close()` (`LoopMailbox` holds its lock
/// around both). `close()` (or deinit) frees the event.
package final class CallbackEvent {
    private var event: Event?
    private let fire: () -> Void

    /// A timer event (`EventLoop.makeTimer`), or with `interval` a persistent one
    /// (`EventLoop.makeEvent(fd: -1, [.persist])`) added with that timeout at once.
    package init(loop: EventLoop, every interval: Duration? = nil, priority: EventPriority, _ fire: @escaping () -> Void) throws(EventLoopError) {
        self.fire = fire
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let interval else {
            event = try loop.makeTimer(priority: priority, context: context, Self.onFire)
            return
        }
        let event = try loop.makeEvent(fd: -1, [.persist], priority: priority, context: context, Self.onFire)
        do {
            try event.add(timeout: interval)
        } catch {
            event.free()
            throw error
        }
        self.event = event
    }

    deinit { close() }

    private static let onFire: EventCallback = { _, _, context in
        Unmanaged<CallbackEvent>.fromOpaque(context!).takeUnretainedValue().fire()
    }

    /// Runs `fire` on the loop's next pass (once, however often it is called before). Nothing
    /// after `close()`.
    package func activate() {
        event?.activate()
    }

    /// Frees the event: `fire` never runs again. Idempotent.
    package func close() {
        event?.free()
        event = nil
    }
}
