// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Logging
import SnapSyncAuth
import SnapSyncWire

/// One client as the hub sees it: its id, where it is in its life, what it still has to be
/// sent and the rooms it has joined. No socket: the hub's request path is tested on plain
/// sessions, and the daemon's `Connection` is a session with a socket (it overrides the three
/// `did…` hooks to arm its timers and close its socket).
///
/// The hub queues output here and puts the session on its dirty list; the IO layer's flush
/// (`OutputFlush`) writes it out once per loop pass.
///
/// Every stored property is `final`, so the hub's accesses on the fan-out path
/// (`Hub.send(shared:to:)`: `state`, `output`, `isDirty`) are direct loads, never class dispatch;
/// only `peer` (for logs) and the hooks, called once per handshake, close and end, are
/// overridable.
class Session {
    /// Where the session is in its life.
    enum State: Equatable {
        /// Opened; only HELLO is allowed.
        case awaitingHello
        /// WELCOME sent; requests are served.
        case ready
        /// Ending: input is discarded, queued output (ending with the ERROR, if any) is still
        /// delivered, and nothing more is queued.
        case closing
    }

    final let id: UInt64
    final var state: State = .awaitingHello
    /// Set once the hub ended the session (`Hub.end`): it is forgotten, and its queue is empty.
    final var isEnded = false
    final var clientName = ""
    /// The protocol version WELCOME chose (PROTOCOL.md §8.2); its frames are decoded with it. A
    /// version 1 session is never a member of an outline room (`Hub+Outlines.swift`).
    final var protocolVersion: UInt64 = ProtocolVersion.current
    /// Who the session's token speaks for and what it grants (`Hub+Auth.swift`); nil when the
    /// daemon does not authenticate. Read once per request that needs a right.
    final var principal: Principal?
    /// When the token (`exp` plus the leeway) runs out, unless an AUTH replaces it first.
    final var authDeadline: Date?
    /// The client certificate the transport verified (mutual TLS), set before HELLO is read;
    /// nil on the plain port and without `--tls-client-ca`.
    final var clientCertificate: ClientCertificate?
    /// `principal` stands for `clientCertificate`, not a token (HELLO had no token and
    /// `--tls-client-grant` is set); an AUTH's token replaces it.
    final var isAuthenticatedByCertificate = false

    /// Mutated once per delivery (`Hub.send(shared:to:)`): `@exclusivity(unchecked)` because
    /// the dynamic exclusivity check cost more than the enqueue itself (docs/benchmarks.md,
    /// Fan-out). Only the loop thread touches it, and never in overlapping accesses.
    @exclusivity(unchecked) final var output: OutputQueue
    /// The rooms joined, each with this session's slot in the room's members (`Membership.swift`).
    final var memberships = SessionRooms()
    /// On the hub's dirty list, waiting for this pass's flush.
    @exclusivity(unchecked) final var isDirty = false  // read once per delivery; see `output`
    /// The transport cannot take more bytes now (the socket's send buffer is full): the session
    /// is not put on the dirty list, since a write would only say EAGAIN. The IO layer sets it.
    final var isOutputBlocked = false
    /// Cluster mode (#20): a request of this session waits for the cluster's log, and the
    /// frames that follow it wait in `deferredInput`, so that answers keep the requests' order
    /// (Hub+ClusterInput.swift). Read once per frame; always false on a single node.
    final var isAwaitingLog = false
    /// Cluster mode: whole frames received while `isAwaitingLog`, oldest first from
    /// `deferredHead`, and their bytes.
    final var deferredInput: [[UInt8]] = []
    final var deferredHead = 0
    final var deferredBytes = 0

    init(id: UInt64, outputCap: Int, meter: OutputMeter) {
        self.id = id
        self.output = OutputQueue(cap: outputCap, meter: meter)
    }

    /// The peer, for logs (computed: only logs read it, and a connection keeps its address).
    var peer: String { "in-process" }

    /// The session in a log line: its id, its peer and, once authenticated, its `sub`.
    final var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = ["conn": "\(id)", "peer": "\(peer)"]
        if let principal { metadata["sub"] = "\(LogEscaping.line(principal.subject))" }
        return metadata
    }

    /// `logMetadata` with `extra`.
    final func logMetadata(_ extra: Logger.Metadata) -> Logger.Metadata {
        logMetadata.merging(extra) { _, new in new }
    }

    /// HELLO was accepted and WELCOME queued.
    func didBecomeReady() {}
    /// The hub started closing the session (`state` is now `closing`).
    func didStartClosing() {}
    /// The hub ended the session: it has left its rooms and been forgotten.
    func didEnd(reason: String) {}
    /// Cluster mode: the session no longer waits for the log and every deferred frame has been
    /// handled (the IO layer finishes an end of input it put off).
    func didDrainDeferredInput() {}
}
