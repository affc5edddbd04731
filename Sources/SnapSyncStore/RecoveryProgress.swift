/// How far a start-up recovery has got: handed to `DurableStore.open`'s `progress` callback
/// after each checkpoint loaded and every few thousand replayed writes, on the opening thread.
/// The daemon uses it to tell systemd it is still working (EXTEND_TIMEOUT_USEC).
package struct RecoveryProgress: Sendable, Hashable {
    package var checkpointsLoaded: Int
    package var recordsReplayed: Int
}
