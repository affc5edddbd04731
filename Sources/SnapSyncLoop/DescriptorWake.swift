#if canImport(Glibc)
    internal import Glibc
#endif

/// Wakes a loop from another thread on a loop made without locking (EVENT_BASE_FLAG_NOLOCK): a
/// pipe whose read end the loop watches with a persistent read event. `signal()` writes one byte
/// from any thread (one write(2), no libevent call); the loop's read callback empties the pipe,
/// then runs `fire` once however many signals came in between.
///
/// Why not `event_active` from the other thread: that needs libevent's locks on the base (the
/// cluster's loop has them, `LoopMailbox` with `.activation`); a single node's loop takes none,
/// and a mutex per event operation on every pass, so that a worker can wake the loop now and
/// then, would tax every connection. libevent's own cross-thread wake-up is a pipe or eventfd
/// too. A pipe rather than an eventfd: Swift's Glibc module does not declare eventfd(2), and
/// `LoopMailbox` signals at most once between two drains, so the pipe never fills.
///
/// Thread-safety: `signal()` from any thread, but never racing `close()` (the descriptor
/// number could be reused): `LoopMailbox` holds its lock around both. Everything else on the
/// loop's thread.
package final class DescriptorWake {
    private var readEnd: Int32 = -1
    private var writeEnd: Int32 = -1
    private var event: Event?
    private let fire: () -> Void

    package init(loop: EventLoop, priority: EventPriority, _ fire: @escaping () -> Void) throws(EventLoopError) {
        self.fire = fire
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw EventLoopError(function: "pipe") }
        (readEnd, writeEnd) = (ends[0], ends[1])
        do throws(EventLoopError) {
            for end in ends {
                guard fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) == 0, fcntl(end, F_SETFD, FD_CLOEXEC) == 0 else {
                    throw EventLoopError(function: "fcntl")
                }
            }
            let context = Unmanaged.passUnretained(self).toOpaque()
            let event = try loop.makeEvent(fd: readEnd, [.read, .persist], priority: priority, context: context, Self.onReadable)
            do {
                try event.add()
            } catch {
                event.free()
                throw error
            }
            self.event = event
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    private static let onReadable: EventCallback = { _, _, context in
        Unmanaged<DescriptorWake>.fromOpaque(context!).takeUnretainedValue().drainAndFire()
    }

    private func drainAndFire() {
        var bytes = (UInt64(0), UInt64(0))
        while read(readEnd, &bytes, MemoryLayout.size(ofValue: bytes)) > 0 {}
        fire()
    }

    /// Any thread: makes the loop run `fire` at a next pass. A full pipe (EAGAIN) already holds a
    /// wake-up, and a closed descriptor is ruled out by the caller's lock.
    package func signal() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1)
    }

    /// Frees the event and closes the pipe: `fire` never runs again. Idempotent.
    package func close() {
        event?.free()
        event = nil
        for end in [readEnd, writeEnd] where end >= 0 { _ = Glibc.close(end) }
        (readEnd, writeEnd) = (-1, -1)
    }
}
