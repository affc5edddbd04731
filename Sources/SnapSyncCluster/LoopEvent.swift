internal import CLibevent

/// A libevent event of the daemon's loop that runs `fire` on the loop thread: every `interval`
/// when one is given (a persistent timer), and on the loop's next pass after `activate()`.
/// Loop thread only; `close()` (or deinit) frees the event.
final class LoopEvent {
    private var event: OpaquePointer?
    private let fire: () -> Void

    init(base: OpaquePointer, every interval: Duration?, name: String, fire: @escaping () -> Void) throws(NATSError) {
        self.fire = fire
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard
            let event = event_new(
                base, -1, interval == nil ? 0 : Int16(EV_PERSIST),
                { _, _, context in Unmanaged<LoopEvent>.fromOpaque(context!).takeUnretainedValue().fire() }, context)
        else {
            throw NATSError(operation: "event_new", identifier: name, code: .status(0), text: "libevent could not make an event")
        }
        self.event = event
        if let interval {
            let (seconds, attoseconds) = interval.components
            var tv = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
            event_add(event, &tv)
        }
    }

    deinit { close() }

    /// Runs `fire` on the loop's next pass (once, however often it is called before).
    func activate() {
        if let event { event_active(event, 0, 0) }
    }

    func close() {
        if let event { event_free(event) }
        event = nil
    }
}
