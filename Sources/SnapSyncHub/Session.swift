// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
package import Logging
import SnapSyncAuth
import SnapSyncModel
import SnapSyncWire

/// One client as the hub sees it: its id, where it is in its life, what it still has to be
/// sent and the rooms it has joined. No socket: the hub's request path is tested on plain
/// sessions, and in the daemon a `Connection` has a session and is its `transport`, told of the
/// session's handshake, close and end (`SessionTransport`).
///
/// The hub queues output here and puts the session on its dirty list; at the end of the loop
/// pass the hub commits the pass's writes and hands each dirty session to the IO layer, which
/// writes its output out (`Hub.finishPass`).
///
/// The class is final, so the hub's accesses on the fan-out path (`Hub.send(shared:to:)`:
/// `state`, `output`, `isDirty`) are direct loads, never class dispatch.
package final class Session {
    /// Where the session is in its life.
    package enum State: Equatable {
        /// Opened; only HELLO is allowed.
        case awaitingHello
        /// WELCOME sent; requests are served.
        case ready
        /// Ending: input is discarded, queued output (ending with the ERROR, if any) is still
        /// delivered, and nothing more is queued.
        case closing
    }

    package let id: UInt64
    // What the IO layer reads of the session is a computed property over storage it cannot
    // name: another module accessing a stored property directly checks it for exclusive
    // access at run time (about 80 instructions) and copies a struct out whole, on every flush.
    // The flags' getters are inlinable, so that the flush reads them as plain loads; the hot
    // ones are `@exclusivity(unchecked)` for the reason given on `output`.

    /// Read on every delivery (`Hub.send(shared:to:)`).
    package internal(set) var state: State {
        @inlinable get { _state }
        set { _state = newValue }
    }
    @exclusivity(unchecked) @usableFromInline var _state: State = .awaitingHello
    /// Set once the hub ended the session (`Hub.end`): it is forgotten, and its queue is empty.
    package internal(set) var isEnded: Bool {
        @inlinable get { _isEnded }
        set { _isEnded = newValue }
    }
    @exclusivity(unchecked) @usableFromInline var _isEnded = false  // read once per delivery
    var clientName = ""
    /// The protocol version WELCOME chose (PROTOCOL.md §8.2); its frames are decoded with it. A
    /// version 1 session is never a member of an outline room (`Hub+Outlines.swift`).
    var protocolVersion: UInt64 = ProtocolVersion.current
    /// Who the session's token speaks for and what it grants (`Hub+Auth.swift`); nil when the
    /// daemon does not authenticate. Read once per request that needs a right.
    var principal: Principal?
    /// When the token (`exp` plus the leeway) runs out, unless an AUTH replaces it first.
    var authDeadline: Date?
    /// The client certificate the transport verified (mutual TLS), set before HELLO is read;
    /// nil on the plain port and without `--tls-client-ca`.
    package var clientCertificate: ClientCertificate?
    /// `principal` stands for `clientCertificate`, not a token (HELLO had no token and
    /// `--tls-client-grant` is set); an AUTH's token replaces it.
    var isAuthenticatedByCertificate = false
    /// The token whose verification gave `principal` (at most `TokenVerifier.maxTokenBytes`): an
    /// AUTH with the same bytes changes nothing and is answered without a signature check.
    var heldToken: [UInt8]?
    /// When AUTHs' new tokens were verified within the last `Hub.authVerifyWindow` (at most
    /// `Hub.authVerifyBurst` instants, oldest first; `Hub+Auth.swift`).
    var authVerifications: [ContinuousClock.Instant] = []
    /// SET_PRESENCE allowance (Hub+Presence.swift); nil until the first one.
    var presenceUpdates: TokenBucket?

    /// Mutated once per delivery (`Hub.send(shared:to:)`): `@exclusivity(unchecked)` because
    /// the dynamic exclusivity check cost more than the enqueue itself (docs/benchmarks.md,
    /// Fan-out). Only the loop thread touches it, and never in overlapping accesses.
    @exclusivity(unchecked) var output: OutputQueue
    /// The rooms joined, each with this session's slot in the room's members (`Membership.swift`).
    var memberships = SessionRooms()
    /// WINDOWs that join a room, by request id, while the engine finds the room
    /// (`Hub.completeJoin` answers them with WINDOW_STATE).
    var pendingWindows: [UInt64: [SectionWindow]] = [:]
    /// On the hub's dirty list, waiting for this pass's flush.
    @exclusivity(unchecked) var isDirty = false  // read once per delivery; see `output`
    /// The transport cannot take more bytes now (the socket's send buffer is full): the session
    /// is not put on the dirty list, since a write would only say EAGAIN. The IO layer sets it.
    package var isOutputBlocked: Bool {
        @inlinable get { _isOutputBlocked }
        set { _isOutputBlocked = newValue }
    }
    @exclusivity(unchecked) @usableFromInline var _isOutputBlocked = false  // read once per delivery
    /// A request of this session waits for the engine's answer (the cluster's log), and the
    /// frames that follow it wait in `deferredInput`, so that answers keep the requests' order
    /// (Hub+DeferredInput.swift). Read once per frame; always false with the local engine.
    package var isAwaitingLog: Bool { _logWaits > 0 }
    /// The fold computed off the loop for this session's JOIN `requestID` (nil: none could be),
    /// while that JOIN is handled again with it (Hub+FoldedCatchup.swift).
    var foldDone: (requestID: UInt64, fold: FoldedCatchup?)?
    /// How many of this session's requests wait for the log: one, or several writes of one
    /// room queued behind each other in that room's queue (`pipelinedRoom`).
    var logWaits: Int {
        get { _logWaits }
        set { _logWaits = newValue }
    }
    @exclusivity(unchecked) private var _logWaits = 0  // read once per frame
    /// The room whose queue holds every request of this session that waits for the log, when
    /// they are all writes: a next write of that room joins them there at once
    /// (`Hub.receive`), instead of waiting for them to be answered. nil otherwise.
    var pipelinedRoom: String?
    /// Whole frames received while `isAwaitingLog`, oldest first from
    /// `deferredHead`, and their bytes.
    var deferredInput: [[UInt8]] = []
    var deferredHead = 0
    var deferredBytes = 0

    /// The transport that carries the session (in the daemon, its `Connection`), held until the
    /// hub ends the session; nil for an in-process session.
    package var transport: (any SessionTransport)? {
        get { _transport }
        set {
            _transport = newValue
            if newValue == nil { transportContext = nil }
        }
    }
    private var _transport: (any SessionTransport)?
    /// The transport's pointer to itself, for the IO layer's own use, or nil: the daemon's
    /// `Connection` sets it to itself, unretained, so that a pass's sends (its queues' and its
    /// broadcasts') reach each connection without a reference count or a type check. Cleared
    /// with `transport`.
    @exclusivity(unchecked) package var transportContext: UnsafeMutableRawPointer?

    package init(id: UInt64, outputCap: Int, meter: OutputMeter) {
        self.id = id
        self.output = OutputQueue(cap: outputCap, meter: meter)
    }

    // MARK: The transport's side of the output queue (once per flush, not per delivery)

    /// Bytes are queued that the transport has not taken yet.
    package var hasQueuedOutput: Bool { !output.isEmpty }

    /// `OutputQueue.gather`: the unsent bytes, in order, as up to `capacity` spans.
    package func gatherOutput(into spans: UnsafeMutablePointer<OutputSpan>, capacity: Int, skipping: Int = 0) -> Int {
        output.gather(into: spans, capacity: capacity, skipping: skipping)
    }

    /// Unsent bytes queued (read-only: an IO thread may read it while the loop's thread waits).
    package var queuedOutputBytes: Int { output.pendingBytes }

    /// Drops everything queued (a TLS connection closing before its handshake is done: it could
    /// not read it).
    package func dropQueuedOutput() {
        output.removeAll()
    }

    /// `OutputQueue.consume`: the transport took `count` bytes from the front.
    /// - Returns: whether bytes are still queued (`hasQueuedOutput`), answered in the same call.
    @discardableResult
    package func consumeOutput(_ count: Int) -> Bool {
        output.consume(count)
        return !output.isEmpty
    }

    /// Calls `body` with each of `sessions`, in order, without retaining and releasing each: the
    /// fan-out's and the flush's per-member loops, where the pair was a seventh of the daemon's
    /// time at 1,000 members (perf: `swift_retain`/`swift_release` under `Hub.fanOut`). Safe
    /// because `sessions` holds every one of them for the whole call, whatever `body` does to
    /// the array it was copied from (a member cut off leaves its room's array, not this copy).
    /// - Complexity: O(sessions).
    @inline(__always)
    static func forEachUnretained(in sessions: [Session], _ body: (Session) -> Void) {
        sessions.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: Unmanaged<Session>.self) { references in
                for reference in references { reference._withUnsafeGuaranteedRef(body) }
            }
        }
    }

    /// The peer, for logs (computed: only logs read it).
    package var peer: String { transport?.peer ?? "in-process" }

    /// The session in a log line: its id, its peer and, once authenticated, its `sub`.
    package var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = ["conn": "\(id)", "peer": "\(peer)"]
        if let principal { metadata["sub"] = "\(LogEscaping.line(principal.subject))" }
        return metadata
    }

    /// `logMetadata` with `extra`.
    package func logMetadata(_ extra: Logger.Metadata) -> Logger.Metadata {
        logMetadata.merging(extra) { _, new in new }
    }

}

/// What carries a session's bytes (the daemon's `Connection`), told what the hub decided: the
/// hooks run on the loop thread, inside the hub's handling of a request or a pass.
package protocol SessionTransport: AnyObject {
    /// The peer, for logs.
    var peer: String { get }
    /// HELLO was accepted and WELCOME queued.
    func sessionBecameReady()
    /// The hub started closing the session (`state` is now `closing`).
    func sessionStartedClosing()
    /// The hub ended the session: it has left its rooms and been forgotten; the transport is
    /// let go after this call.
    func sessionEnded(reason: String)
    /// Cluster mode: the session no longer waits for the log and every deferred frame has been
    /// handled (the IO layer finishes an end of input it put off).
    func sessionDrainedDeferredInput()
    /// Cluster mode: a turn's worth of the session's deferred frames was handled
    /// (`Hub.maxDeferredFramesPerTurn`) and `frames` (whole, in order) remain: the transport
    /// handles them as its own input, before anything it reads later, a turn at a time.
    func sessionReturnsInput(_ frames: [UInt8])
    /// The end of the pass (`Hub.finishPass`): the pass's writes are committed, and the session
    /// has output queued. Called once per dirty session per pass.
    func sendQueuedOutput()
}
