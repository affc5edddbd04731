internal import CNatsLibevent

// libnats's libevent adapter, the one libnats code that touches the loop: the only file that
// imports CNatsLibevent. It speaks no libnats type (the shim's header takes `void *`), so this
// module needs nothing of libnats; SnapSyncCluster's NATSConnection, the only importer of CNats,
// hands its options here and checks the status it gets back.

extension EventLoop {
    /// Once per process, before making a loop that other threads touch (`init(locking: true)`):
    /// turns on libevent's pthread locking, `evthread_use_pthreads` (through libnats's
    /// `natsLibevent_Init`, in `snapsync_nats_libevent_init`). libnats's threads (reconnect,
    /// flusher, timers) add events to the loop its connection runs on, and `LoopMailbox` makes
    /// its event active from theirs; without this the base would have no lock to take.
    package static func enableThreadedAccess() throws(EventLoopError) {
        try libeventCheck(snapsync_nats_libevent_init(), "evthread_use_pthreads")
    }

    /// Makes the libnats connection that `options` (a `natsOptions *`) will connect run its
    /// socket's reads and writes on this loop: `natsOptions_SetEventLoop` with the adapter's
    /// callbacks (through `snapsync_nats_options_use_libevent`). The loop must have been made with
    /// locking after `enableThreadedAccess()`, and must outlive the connection.
    /// - Returns: libnats's `natsStatus` as its raw value, for the caller's one check of libnats
    ///   statuses (this module knows nothing of libnats's types).
    package func attachNATS(options: OpaquePointer) -> Int32 {
        snapsync_nats_options_use_libevent(UnsafeMutableRawPointer(options), UnsafeMutableRawPointer(base))
    }
}
