import SnapSyncStore
import SnapSyncWire

/// How the hub's rooms are held and changed, chosen once, when the hub is made: on this node,
/// with its store (`LocalRoomEngine`), or as replicas of a cluster's log
/// (`ReplicatedRoomEngine`, docs/cluster.md).
///
/// The hub does everything engine-independent first, once for every request: it decodes the
/// frame, checks the room's name and the session's right (`Hub.admit`), and it answers JOINs
/// from a room once the engine has one (`Hub.completeJoin`), fans DIFFs out, queues output and
/// commits at the end of the pass. The engine finds or makes the room and decides how a write,
/// a DROP or a SET_TTL becomes a change of it.
///
/// Everything runs on the loop's thread. An engine answers a request at once or later (the
/// replicated one when the log has answered); a request that is answered later holds the
/// session's next frames back (`Hub.awaitLog`), so each session's answers keep its order.
protocol RoomEngine: AnyObject {
    /// JOIN of a room whose name and read right the hub has checked, by a session under its
    /// limit of rooms.
    func join(requestID: UInt64, roomName: String, resume: ResumePoint?, from session: Session)
    /// MUTATE, REPLACE or REPLACE_SECTION, admitted by the hub.
    func write(_ write: AdmittedWrite, from session: Session)
    /// Whether a write of `roomName` would be queued behind the writes already waiting there,
    /// answered after them (never at once): the hub then hands a session's next write over
    /// without waiting for its previous ones (Hub+DeferredInput.swift). False for an engine
    /// that answers at once.
    func queuesWrite(toRoom roomName: String) -> Bool
    /// DROP, admitted by the hub (the `admin` right).
    func drop(requestID: UInt64, roomName: String, from session: Session)
    /// SET_TTL, admitted by the hub (the `write` right).
    func setTTL(requestID: UInt64, roomName: String, seconds: UInt64, from session: Session)
    /// Makes the pass's changes durable before anything of the pass is sent (`Hub.finishPass`).
    func commit() throws(StoreError)
    /// The one-second timer, with an instant of the hub's `monotonicNow`: expiries, sleep and
    /// store maintenance, or the follows' maintenance.
    func tick(now: ContinuousClock.Instant)
    /// Rooms this node's store holds, awake or asleep (STATS `rooms_stored`, what
    /// `--max-stored-rooms` bounds); 0 when the rooms are kept elsewhere (a cluster's log).
    var storedRoomCount: Int { get }
}

/// A write whose room name and right the hub has checked.
struct AdmittedWrite {
    let requestID: UInt64
    let roomName: String
    let writeID: [UInt8]
    let request: Room.WriteRequest
    /// When the hub began handling it (`WriteAckTimer.start`), 0 without the metrics endpoint.
    let received: UInt64
}
