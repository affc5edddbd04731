internal import CLibevent

// The whole libevent interface of the daemon, after Redis's ae.h: one loop type, one event
// handle, and about twenty small functions. Every event and loop call of SnapSync is in this
// file (libevent's HTTP server is HTTPEndpoint.swift's, libnats's adapter EventLoop+NATS.swift's,
// both in this module); each wrapper's doc names the function it calls, and every return code
// goes through `libeventCheck`, the one place that turns a failure into `EventLoopError` (a
// run-time failure such as out of memory) or a precondition failure (a misuse, i.e. a bug here).
//
// Why plain events and not bufferevents: libevent 2.1's bufferevents re-arm their write event
// around every writev (+45% CPU at low rates, measured with a C reference broadcaster) and read
// at most 4096 bytes per call. The daemon keeps its own queues (OutputQueue, each connection's
// input buffer) and uses only EV_READ|EV_PERSIST per connection plus an EV_WRITE added while the
// kernel's send buffer is full.

/// A libevent call failed for a reason outside the program's control (memory, descriptors, the
/// kernel's event backend).
package struct EventLoopError: Error, CustomStringConvertible, Sendable {
    /// The libevent function that failed.
    package var function: String
    package var description: String { "\(function) failed" }
}

/// The one place where libevent return codes are checked (this module's files only: nothing else
/// calls libevent).
/// - `result < 0` with `misuse: false` throws `EventLoopError` (resources).
/// - `result < 0` with `misuse: true` is a precondition failure: the call can only fail when
///   SnapSync passed something wrong (an uninitialized event, a bad priority).
@inline(__always)
func libeventCheck(_ result: Int32, _ function: StaticString, misuse: Bool = false) throws(EventLoopError) {
    guard result < 0 else { return }
    precondition(!misuse, "\(function) failed: a SnapSync bug (misuse of libevent)")
    throw EventLoopError(function: "\(function)")
}

/// The C callback type of `event_new`: `(fd, what, context)`. Implementations are
/// `@convention(c)` closures that recover their owner with `Unmanaged.fromOpaque(context)`.
package typealias EventCallback = @convention(c) (Int32, Int16, UnsafeMutableRawPointer?) -> Void

/// What an event waits for (`EV_READ`, `EV_WRITE`, `EV_PERSIST`, `EV_TIMEOUT`).
package struct EventKinds: OptionSet {
    package let rawValue: Int16
    package init(rawValue: Int16) { self.rawValue = rawValue }
    package static let timeout = EventKinds(rawValue: Int16(EV_TIMEOUT))
    package static let read = EventKinds(rawValue: Int16(EV_READ))
    package static let write = EventKinds(rawValue: Int16(EV_WRITE))
    package static let persist = EventKinds(rawValue: Int16(EV_PERSIST))
}

/// Two priorities (`event_base_priority_init(base, 2)`): every I/O, timer and signal callback of
/// a loop pass runs before the pass's single flush, which is what lets one writev carry
/// everything a pass produced for a connection.
package enum EventPriority: Int32 {
    /// Reads, accepts, writable sockets, timers, signals.
    case io = 0
    /// The flush of dirty connections (the server's `OutputFlush.flushPass`). Also libevent's
    /// default on a base of two priorities, which the events libevent's HTTP server and libnats's
    /// adapter make for themselves get.
    case flush = 1
}

/// One libevent `struct event`. A handle, not an owner: the object that created it calls
/// `free()` exactly once (before it goes away), and never uses it afterwards.
package struct Event {
    fileprivate let raw: OpaquePointer

    /// `event_add(ev, timeout)`: makes the event pending, (re)arming its timeout if given.
    /// Adding an event that is already pending only resets its timeout.
    package func add(timeout: Duration? = nil) throws(EventLoopError) {
        if let timeout {
            var tv = timeval(timeout)
            try libeventCheck(event_add(raw, &tv), "event_add")
        } else {
            try libeventCheck(event_add(raw, nil), "event_add")
        }
    }

    /// `event_del(ev)`: makes the event non-pending (a no-op if it was not). Safe inside the
    /// event's own callback.
    package func remove() {
        try! libeventCheck(event_del(raw), "event_del", misuse: true)
    }

    /// `event_active(ev, EV_TIMEOUT, 0)`: runs the callback in this loop pass, at the event's
    /// priority, without touching the kernel. Activating an already active event does nothing.
    package func activate() {
        event_active(raw, Int32(EV_TIMEOUT), 0)
    }

    /// `event_pending(ev, what, NULL)`: whether the event is pending for any of `kinds`.
    package func isPending(_ kinds: EventKinds = [.read, .write, .timeout]) -> Bool {
        event_pending(raw, kinds.rawValue, nil) != 0
    }

    /// `event_free(ev)`: removes and deallocates the event. Safe inside its own callback.
    package func free() {
        event_free(raw)
    }
}

/// One `event_base`: the loop a single thread runs.
///
/// Created with `EVENT_BASE_FLAG_NOLOCK` (but in cluster mode, `init(locking:)`): only the
/// owning thread ever touches it. Sharding
/// rooms over one loop per core (as memcached does with its worker threads) means one
/// `EventLoop` per thread; other threads reach a loop only through a queue plus a wake-up (an
/// `EventKinds.read` event on an eventfd/pipe, or `LoopMailbox`'s activated event on a base with
/// locking), never by calling into it directly.
package final class EventLoop {
    /// The `event_base`: for this module's files only (libevent's HTTP server, `HTTPEndpoint`,
    /// and libnats's adapter, `attachNATS`, run on this loop too); no raw base leaves it.
    let base: OpaquePointer

    /// `event_config_new`, `event_config_set_flag(EVENT_BASE_FLAG_NOLOCK)` unless `locking`,
    /// `event_base_new_with_config`, `event_config_free`, then `event_base_priority_init(base, 2)`.
    /// - Parameter locking: a base other threads may touch (cluster mode: libnats's threads add
    ///   events to it and make them active). libevent then takes a mutex per event operation;
    ///   its threading must have been set up first (`evthread_use_pthreads`, done by
    ///   `EventLoop.enableThreadedAccess()`), or the base has no lock to take.
    package init(locking: Bool = false) throws(EventLoopError) {
        guard let config = event_config_new() else { throw EventLoopError(function: "event_config_new") }
        defer { event_config_free(config) }
        if !locking {
            try libeventCheck(event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue)), "event_config_set_flag", misuse: true)
        }
        guard let base = event_base_new_with_config(config) else {
            throw EventLoopError(function: "event_base_new_with_config")
        }
        self.base = base
        try libeventCheck(event_base_priority_init(base, 2), "event_base_priority_init", misuse: true)
    }

    /// `event_base_free(base)`. Every event made on this loop must have been freed.
    deinit {
        event_base_free(base)
    }

    /// `event_base_loop(base, 0)`: runs callbacks until `stop()` or no event is left.
    package func run() throws(EventLoopError) {
        try libeventCheck(event_base_loop(base, 0), "event_base_loop")
    }

    /// `event_base_loop(base, EVLOOP_NONBLOCK)`: runs the callbacks of the events ready now,
    /// without waiting. Before `Server.start()`, while start-up recovers on this thread, it
    /// serves the metrics endpoint (`MetricsEndpoint.serveWhileStarting()`).
    package func runReady() throws(EventLoopError) {
        try libeventCheck(event_base_loop(base, EVLOOP_NONBLOCK), "event_base_loop")
    }

    /// `event_base_loop(base, EVLOOP_ONCE)`: waits until some event is ready, runs the callbacks
    /// of that pass, and returns. The cluster's tests run their loop pass by pass so, until what
    /// they wait for has come.
    package func runOnce() throws(EventLoopError) {
        try libeventCheck(event_base_loop(base, EVLOOP_ONCE), "event_base_loop")
    }

    /// `event_base_loopbreak(base)`: `run()` returns after the callback that is running now.
    package func stop() {
        try! libeventCheck(event_base_loopbreak(base), "event_base_loopbreak", misuse: true)
    }

    /// `event_base_get_method(base)`: the kernel backend ("epoll").
    package var backend: String { String(cString: event_base_get_method(base)) }

    /// `event_get_version()`: the libevent version linked in.
    package static var libeventVersion: String { String(cString: event_get_version()) }

    /// `event_new(base, fd, kinds, callback, context)` then `event_priority_set(ev, priority)`.
    /// Not pending until `add()`.
    package func makeEvent(
        fd: Int32, _ kinds: EventKinds, priority: EventPriority = .io,
        context: UnsafeMutableRawPointer, _ callback: EventCallback
    ) throws(EventLoopError) -> Event {
        guard let raw = event_new(base, fd, kinds.rawValue, callback, context) else {
            throw EventLoopError(function: "event_new")
        }
        try libeventCheck(event_priority_set(raw, priority.rawValue), "event_priority_set", misuse: true)
        return Event(raw: raw)
    }

    /// A pure-timeout event: `evtimer_new` (through `snapsync_evtimer_new`, since it is a macro),
    /// then `event_priority_set`. One-shot: `add(timeout:)` arms it again.
    package func makeTimer(
        priority: EventPriority = .io, context: UnsafeMutableRawPointer,
        _ callback: EventCallback
    ) throws(EventLoopError) -> Event {
        guard let raw = snapsync_evtimer_new(base, callback, context) else {
            throw EventLoopError(function: "evtimer_new")
        }
        try libeventCheck(event_priority_set(raw, priority.rawValue), "event_priority_set", misuse: true)
        return Event(raw: raw)
    }

    /// A persistent signal event: `evsignal_new` (through `snapsync_evsignal_new`, since it is a
    /// macro). libevent installs the handler and delivers the signal as an ordinary callback.
    package func makeSignal(
        _ signal: Int32, context: UnsafeMutableRawPointer,
        _ callback: EventCallback
    ) throws(EventLoopError) -> Event {
        guard let raw = snapsync_evsignal_new(base, signal, callback, context) else {
            throw EventLoopError(function: "evsignal_new")
        }
        return Event(raw: raw)
    }
}

extension timeval {
    /// A non-negative duration as a `timeval` (microsecond precision).
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let clamped = max(0, seconds)
        self.init(tv_sec: Int(clamped), tv_usec: seconds < 0 ? 0 : Int(attoseconds / 1_000_000_000_000))
    }
}
