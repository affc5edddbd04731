public import SnapSyncModel

/// One SnapSync message: the body of one frame (Protocol/PROTOCOL.md, §3).
///
/// Associated values carry the layout's fields under their camelCase names, in layout order.
/// The HELLO magic is not a field here: the encoder always writes "SNAP" and the decoder
/// rejects anything else (`bad_magic`).
///
/// `code` in `.error` and `.reject` is the raw wire number, not `ErrorCode`, because a receiver
/// MUST accept codes it does not know (§6) and must not lose them; `errorCode` gives the typed
/// view. Build messages with known codes through `Message.error(_:_:)` and
/// `Message.reject(requestID:error:message:)`.
///
/// Equality and hashing are byte-exact: two messages are equal when their encodings are equal
/// (see `Message+Hashable.swift`).
public enum Message: Sendable {
    /// Client → server, first frame of a connection: the protocol versions the client speaks.
    case hello(versions: [UInt64], clientName: String, credentials: [UInt8])
    /// Server → client, answer to HELLO: the chosen version and the server's limits.
    case welcome(version: UInt64, sessionID: UInt64, serverName: String, limits: [LimitEntry])
    /// Server → client: a connection-level failure. The server closes after sending it.
    case error(code: UInt64, message: String)
    case ping(nonce: UInt64)
    /// Echoes the PING's nonce.
    case pong(nonce: UInt64)
    /// Subscribe to a room, optionally resuming from a position the client already holds.
    /// `chain` is the replica's chain at that position (version 3, §9: a resume whose chain is
    /// not the room's there gets a SNAPSHOT `resync`); nil without `resume` and in versions 1
    /// and 2, whose layouts have no such field.
    case join(requestID: UInt64, room: String, resume: RoomPosition?, chain: RoomChain? = nil)
    case leave(requestID: UInt64, room: String)
    /// Apply `ops` atomically. `expectedVersion` makes it a compare-and-set; a non-empty
    /// `writeID` (0–32 bytes) makes it idempotent.
    case mutate(requestID: UInt64, room: String, expectedVersion: UInt64?, writeID: [UInt8], ops: [SnapshotOperation])
    /// Replace the room's whole content.
    case replace(requestID: UInt64, room: String, expectedVersion: UInt64?, writeID: [UInt8], snapshot: RoomSnapshot)
    /// Replace one section's items, hierarchy included (version 2, §11.21): UIKit's
    /// `apply(_ sectionSnapshot:, to: section)`. The section's payload is kept.
    case replaceSection(requestID: UInt64, room: String, expectedVersion: UInt64?, writeID: [UInt8], section: SnapshotIdentifier, items: SectionSnapshot)
    case stats(requestID: UInt64)
    /// A fresh token for a live session (§8.4): its grants replace the connection's. Answered
    /// by ACK (epoch 0, version 0) or, when refused, ERROR `unauthorized`.
    case auth(requestID: UInt64, credentials: [UInt8])
    /// Delete a room (§11.19): its members get LEFT `room_deleted` and the name is free; the
    /// next JOIN or write creates a fresh room with a new epoch. Answered by ACK (the dropped
    /// room's last epoch and version; 0, 0 when there was no such room) or REJECT.
    case drop(requestID: UInt64, room: String)
    /// Give a room a time-to-live (§11.20): it expires once it has had no member and no write
    /// for `seconds`; 0 means it never expires, whatever the server's default.
    case setTTL(requestID: UInt64, room: String, seconds: UInt64)
    /// Ask for the room's digest and chain at this connection's position in it (version 3,
    /// §11.22): answered by DIGEST, which a replica compares with its own state.
    case verify(requestID: UInt64, room: String)
    /// The room's whole state at (`epoch`, `version`), answering a JOIN. `chain` is the room's
    /// chain at `version` (version 3, §9 "The room's chain"); nil in the layouts of versions 1
    /// and 2, which have no such field.
    case snapshot(
        requestID: UInt64, room: String, epoch: UInt64, version: UInt64, reason: SnapshotReason,
        digest: SnapshotDigest, snapshot: RoomSnapshot, chain: RoomChain? = nil)
    /// Answer to a JOIN whose resume position the server can serve: the DIFF frames that take
    /// the replica from `fromVersion` to `toVersion` follow, one per version, or (version 3)
    /// one folded DIFF (`CatchupForm`). `form` is nil in the layouts of versions 1 and 2,
    /// which have no such field.
    case catchup(requestID: UInt64, room: String, epoch: UInt64, fromVersion: UInt64, toVersion: UInt64, form: CatchupForm? = nil)
    /// One applied batch: the room moved from `version - 1` to `version` within `epoch`.
    /// `chain` is the room's chain after it (version 3); nil in versions 1 and 2.
    case diff(room: String, epoch: UInt64, version: UInt64, ops: [SnapshotOperation], chain: RoomChain? = nil)
    case ack(requestID: UInt64, epoch: UInt64, version: UInt64)
    /// A request failed; nothing was applied. `opIndex`/`identifier` locate content errors (codes 20–32 and 51–53, PROTOCOL.md §6).
    case reject(requestID: UInt64, code: UInt64, opIndex: UInt64?, identifier: SnapshotIdentifier?, message: String)
    case statsReply(requestID: UInt64, stats: [Stat])
    /// The server removed this connection from `room` (after an AUTH whose grants no longer
    /// cover it, §8.4): no more DIFFs for it follow. `code` is raw, as in ERROR and REJECT.
    case left(room: String, code: UInt64, message: String)
    /// Answer to VERIFY (version 3, §11.23): the SHA-256 digest (§4) and the chain (§9) of the
    /// room at (`epoch`, `version`), the position of the last SNAPSHOT or DIFF of `room` sent on
    /// this connection before it.
    case digest(requestID: UInt64, room: String, epoch: UInt64, version: UInt64, digest: SnapshotDigest, chain: RoomChain)
    /// Start (`watch`) or stop watching the presence of a joined room (version 4, §11.24):
    /// answered by PRESENCE (start) or ACK (stop).
    case presenceWatch(requestID: UInt64, room: String, watch: Bool)
    /// A page of a joined room's presence: members whose id is above `after`, at most `limit`
    /// (0: the server's page) (version 4, §11.25).
    case presenceList(requestID: UInt64, room: String, after: UInt64, limit: UInt64)
    /// Set this connection's presence state in a joined room; empty clears it (version 4, §11.26).
    case setPresence(requestID: UInt64, room: String, state: [UInt8])
    /// The room's member count and the members listed, ascending by id; `next` is the last id
    /// listed when more follow, else 0 (version 4, §11.27).
    case presence(requestID: UInt64, room: String, count: UInt64, members: [PresenceMember], next: UInt64)
    /// How a watched room's presence changed: its member count and the view's changes, at most
    /// one per member (version 4, §11.28).
    case presenceDiff(room: String, count: UInt64, changes: [PresenceChange])
    /// Follow `room` through a window of rows instead of whole (version 4, §11.29): joins it
    /// windowed (answered by WINDOW_STATE), or moves this member's window (answered by
    /// WINDOW_DIFF).
    case window(requestID: UInt64, room: String, window: [SectionWindow])
    /// A windowed member's whole state (version 4, §11.30): the effective `window`, every
    /// section's item count in order, and the window snapshot (`RoomSnapshot.windowSnapshot`).
    case windowState(
        requestID: UInt64, room: String, epoch: UInt64, version: UInt64, chain: RoomChain, window: [SectionWindow], counts: [UInt64],
        snapshot: RoomSnapshot)
    /// How a windowed member's window changed at `version` (version 4, §11.31): request id 0
    /// for a change of the room, else the WINDOW it answers; `window` when the effective window
    /// changed; the counts that changed; ops that turn the old window snapshot into the new.
    case windowDiff(
        requestID: UInt64, room: String, epoch: UInt64, version: UInt64, window: [SectionWindow]?, counts: [SectionCount],
        ops: [SnapshotOperation])
}

extension Message {
    /// One WELCOME limit. `key` stays a raw number because unknown keys MUST be ignored, not
    /// refused; `LimitKey` names the known ones.
    public struct LimitEntry: Hashable, Sendable {
        public var key: UInt64
        public var value: UInt64
        public init(key: UInt64, value: UInt64) {
            self.key = key
            self.value = value
        }
        public init(_ key: LimitKey, _ value: UInt64) {
            self.init(key: key.rawValue, value: value)
        }
    }

    /// One STATS_REPLY counter. Names are open-ended; receivers ignore names they do not know.
    public struct Stat: Hashable, Sendable {
        public var name: String
        public var value: UInt64
        public init(name: String, value: UInt64) {
            self.name = name
            self.value = value
        }
    }

    /// Builds an ERROR with a known code.
    public static func error(_ code: ErrorCode, _ message: String) -> Message {
        .error(code: code.rawValue, message: message)
    }

    /// Builds the REJECT for a batch the model refused: code, op_index and identifier come from
    /// the `BatchError`; the message defaults to its description.
    public static func reject(requestID: UInt64, error: BatchError, message: String? = nil) -> Message {
        .reject(
            requestID: requestID, code: ErrorCode(error.violation).rawValue,
            opIndex: UInt64(error.operationIndex), identifier: error.violation.identifier,
            message: message ?? error.violation.description)
    }

    /// Builds a REJECT with a known code that is not about one operation (40 and up).
    public static func reject(requestID: UInt64, _ code: ErrorCode, _ message: String) -> Message {
        .reject(requestID: requestID, code: code.rawValue, opIndex: nil, identifier: nil, message: message)
    }

    /// The message's type code.
    public var type: MessageType {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .error: .error
        case .ping: .ping
        case .pong: .pong
        case .join: .join
        case .leave: .leave
        case .mutate: .mutate
        case .replace: .replace
        case .replaceSection: .replaceSection
        case .stats: .stats
        case .snapshot: .snapshot
        case .catchup: .catchup
        case .diff: .diff
        case .ack: .ack
        case .reject: .reject
        case .statsReply: .statsReply
        case .auth: .auth
        case .left: .left
        case .drop: .drop
        case .setTTL: .setTTL
        case .verify: .verify
        case .digest: .digest
        case .presenceWatch: .presenceWatch
        case .presenceList: .presenceList
        case .setPresence: .setPresence
        case .presence: .presence
        case .presenceDiff: .presenceDiff
        case .window: .window
        case .windowState: .windowState
        case .windowDiff: .windowDiff
        }
    }

    /// The typed code of an ERROR or REJECT, when this peer knows it; `nil` for other messages
    /// and for unknown codes (which a receiver treats as a generic failure of the same kind).
    public var errorCode: ErrorCode? {
        switch self {
        case .error(let code, _), .reject(_, let code, _, _, _), .left(_, let code, _): ErrorCode(rawValue: code)
        default: nil
        }
    }

    /// The request id a server message answers, or a client request carries; `nil` for HELLO,
    /// WELCOME, ERROR, PING, PONG, DIFF and LEFT.
    public var requestID: UInt64? {
        switch self {
        case .join(let id, _, _, _), .leave(let id, _), .mutate(let id, _, _, _, _), .replace(let id, _, _, _, _),
            .replaceSection(let id, _, _, _, _, _),
            .stats(let id), .auth(let id, _), .drop(let id, _), .setTTL(let id, _, _), .snapshot(let id, _, _, _, _, _, _, _), .catchup(let id, _, _, _, _, _),
            .ack(let id, _, _), .reject(let id, _, _, _, _), .statsReply(let id, _), .verify(let id, _), .digest(let id, _, _, _, _, _),
            .presenceWatch(let id, _, _), .presenceList(let id, _, _, _), .setPresence(let id, _, _), .presence(let id, _, _, _, _),
            .window(let id, _, _), .windowState(let id, _, _, _, _, _, _, _), .windowDiff(let id, _, _, _, _, _, _):
            id
        case .hello, .welcome, .error, .ping, .pong, .diff, .left, .presenceDiff:
            nil
        }
    }
}

/// Why a SNAPSHOT was sent (§3).
public enum SnapshotReason: UInt8, Hashable, Sendable, CaseIterable {
    /// The JOIN had no resume position.
    case initial = 0
    /// The JOIN's resume position could not be served from history: discard the replica.
    case resync = 1
}

/// Which side may send a message (§3, "sent by").
public enum Sender: Hashable, Sendable {
    case client, server, either
}

/// The type byte of a frame (§3).
public enum MessageType: UInt8, Hashable, Sendable, CaseIterable {
    case hello = 0x01
    case welcome = 0x02
    case error = 0x03
    case ping = 0x04
    case pong = 0x05
    case join = 0x10
    case leave = 0x11
    case mutate = 0x12
    case replace = 0x13
    case stats = 0x14
    case auth = 0x15
    case drop = 0x16
    case setTTL = 0x17
    /// Version 2 and later (§8.2).
    case replaceSection = 0x18
    /// Version 3 and later (§8.2).
    case verify = 0x19
    /// Version 4 and later (§8.2).
    case presenceWatch = 0x1A
    /// Version 4 and later (§8.2).
    case presenceList = 0x1B
    /// Version 4 and later (§8.2).
    case setPresence = 0x1C
    /// Version 4 and later (§8.2).
    case window = 0x1D
    case snapshot = 0x20
    case catchup = 0x21
    case diff = 0x22
    case ack = 0x23
    case reject = 0x24
    case statsReply = 0x25
    case left = 0x26
    /// Version 3 and later (§8.2).
    case digest = 0x27
    /// Version 4 and later (§8.2).
    case presence = 0x28
    /// Version 4 and later (§8.2).
    case presenceDiff = 0x29
    /// Version 4 and later (§8.2).
    case windowState = 0x2A
    /// Version 4 and later (§8.2).
    case windowDiff = 0x2B

    public var sentBy: Sender {
        switch self {
        case .hello, .join, .leave, .mutate, .replace, .replaceSection, .stats, .auth, .drop, .setTTL, .verify,
            .presenceWatch, .presenceList, .setPresence, .window:
            .client
        case .welcome, .error, .snapshot, .catchup, .diff, .ack, .reject, .statsReply, .left, .digest, .presence, .presenceDiff,
            .windowState, .windowDiff:
            .server
        case .ping, .pong: .either
        }
    }

    /// The name used in PROTOCOL.md and in the JSON form: `"HELLO"`, `"STATS_REPLY"`.
    public var name: String {
        switch self {
        case .hello: "HELLO"
        case .welcome: "WELCOME"
        case .error: "ERROR"
        case .ping: "PING"
        case .pong: "PONG"
        case .join: "JOIN"
        case .leave: "LEAVE"
        case .mutate: "MUTATE"
        case .replace: "REPLACE"
        case .stats: "STATS"
        case .snapshot: "SNAPSHOT"
        case .catchup: "CATCHUP"
        case .diff: "DIFF"
        case .ack: "ACK"
        case .reject: "REJECT"
        case .statsReply: "STATS_REPLY"
        case .auth: "AUTH"
        case .left: "LEFT"
        case .drop: "DROP"
        case .setTTL: "SET_TTL"
        case .replaceSection: "REPLACE_SECTION"
        case .verify: "VERIFY"
        case .digest: "DIGEST"
        case .presenceWatch: "PRESENCE_WATCH"
        case .presenceList: "PRESENCE_LIST"
        case .setPresence: "SET_PRESENCE"
        case .presence: "PRESENCE"
        case .presenceDiff: "PRESENCE_DIFF"
        case .window: "WINDOW"
        case .windowState: "WINDOW_STATE"
        case .windowDiff: "WINDOW_DIFF"
        }
    }

    /// Whether a connection of protocol `version` has this message type (§8.2).
    public func exists(inVersion version: UInt64) -> Bool {
        switch self {
        case .replaceSection: ProtocolVersion.hasOutlines(version)
        case .verify, .digest: ProtocolVersion.hasChain(version: version)
        case .presenceWatch, .presenceList, .setPresence, .presence, .presenceDiff, .window, .windowState, .windowDiff:
            ProtocolVersion.hasPresence(version)
        default: true
        }
    }
}
