package import SnapSyncWire

/// Counters by message type and by error code, the hub's `traffic` beside its `ServerStats`
/// (the metrics endpoint's per-type and per-code series; STATS keeps the totals, which these
/// split).
///
/// Each counter is a slot of one fixed allocation indexed by the frame's type byte (or the
/// code), so counting is an add through a pointer on the per-frame path: no dictionary, no
/// copy-on-write check, no atomics (the loop's thread only), and no retain: the hub holds it in
/// a `let` (held inside the `ServerStats` struct, reading it out retained and released it on
/// every frame: about 500 instructions more per write, measured with callgrind,
/// docs/benchmarks.md). Every type byte has a slot, so
/// types added later (and unknown bytes from clients) are counted too; the endpoint names the
/// known ones and sums the rest under `unknown`, keeping its label values bounded.
package final class TrafficCounters {
    private static let slots = 256
    /// frames in, frame bytes in, frames out, frame bytes out (256 each), write rejections by
    /// code (256).
    private let storage: UnsafeMutablePointer<UInt64>

    init() {
        storage = .allocate(capacity: 5 * Self.slots)
        storage.initialize(repeating: 0, count: 5 * Self.slots)
    }

    deinit {
        storage.deallocate()
    }

    /// A whole frame received (length prefix included); `type` is its type byte.
    @inline(__always)
    func received(type: UInt8, bytes: Int) {
        storage[Int(type)] &+= 1
        storage[Self.slots + Int(type)] &+= UInt64(truncatingIfNeeded: bytes)
    }

    /// `frames` frames queued for one session (a DIFF once per member), `bytes` in all, length
    /// prefixes included.
    @inline(__always)
    func queued(type: UInt8, frames: Int = 1, bytes: Int) {
        storage[2 * Self.slots + Int(type)] &+= UInt64(truncatingIfNeeded: frames)
        storage[3 * Self.slots + Int(type)] &+= UInt64(truncatingIfNeeded: bytes)
    }

    /// A write (MUTATE or REPLACE) answered with REJECT `code`.
    @inline(__always)
    func rejected(_ code: ErrorCode) {
        storage[4 * Self.slots + Int(truncatingIfNeeded: code.rawValue & 0xff)] &+= 1
    }

    package func framesReceived(type: UInt8) -> UInt64 { storage[Int(type)] }
    package func bytesReceived(type: UInt8) -> UInt64 { storage[Self.slots + Int(type)] }
    package func framesQueued(type: UInt8) -> UInt64 { storage[2 * Self.slots + Int(type)] }
    package func bytesQueued(type: UInt8) -> UInt64 { storage[3 * Self.slots + Int(type)] }
    package func writesRejected(_ code: ErrorCode) -> UInt64 { storage[4 * Self.slots + Int(truncatingIfNeeded: code.rawValue & 0xff)] }
}

extension Hub {
    /// A write (MUTATE or REPLACE) answered with REJECT `code`: STATS `writes_rejected` and its
    /// per-code counter.
    func countRejectedWrite(_ code: ErrorCode) {
        stats.writesRejected += 1
        traffic.rejected(code)
    }
}
