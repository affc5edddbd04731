#if canImport(Glibc)
    internal import Glibc
#endif

/// SnapSync's JetStream streams and the salt of every epoch, made sure of before the loop runs
/// (`JetStreamRoomLog.connect`): the policy on top of `NATSAdminConnection`'s libnats calls.
///
/// Blocking, on a short-lived connection with libnats's own threads: never from a loop callback
/// (`NATSConnection`'s doc says why).
package enum StreamProvisioning {
    /// Creates the stream, or updates it when it exists with another configuration (saying in
    /// `replacedMaxMessagesPerSubject` when that changed its retention), then reads its salt when
    /// `spec` has a `saltSubject` (proposing one first, see `ensureSalt`). Idempotent.
    ///
    /// A cluster just started may not answer JetStream's API for a while (its meta leader is
    /// being elected): no responders at once, or no answer within `timeout`. So a few attempts,
    /// a second apart; cluster mode's start waits longer around this, with backoff
    /// (`ClusterStartRetry`), for servers that cannot serve for a while.
    @discardableResult
    package static func ensureStream(
        _ spec: StreamSpec, servers: [String], tls: NATSTLS = NATSTLS(), timeout: Duration = .seconds(10)
    ) throws(NATSError) -> StreamInfo {
        let identifier = "stream \(spec.name)"
        let admin = try NATSAdminConnection(servers: servers, tls: tls, timeout: timeout, identifier: identifier)
        var attempt = 1
        var info: StreamInfo
        while true {
            do throws(NATSError) {
                info = try admin.addOrUpdateStream(spec, identifier: identifier)
                break
            } catch  where attempt < 3 && (error.isTimeout || error.isNoResponders) {
                attempt += 1
                sleep(1)
            }
        }
        if let saltSubject = spec.saltSubject {
            info.salt = try ensureSalt(admin, stream: spec.name, subject: saltSubject)
        }
        return info
    }

    /// The first message of `subject` in `stream`, after proposing one: 16 random bytes in hex,
    /// stored only if the subject has no message (`Nats-Expected-Last-Subject-Sequence: 0`; a
    /// refusal, "wrong last sequence", means another client stored one). nats-server 2.9 may
    /// store several proposals of clients starting at once (it does not serialise that
    /// expectation for concurrent publishes, nats-io/nats-server#4320), so the salt is the
    /// first by sequence, which is the same for every client: `$JS.API.STREAM.MSG.GET` of the
    /// next message of the subject from sequence 1, answered by the stream's leader (not a
    /// direct get, which a replica behind it may answer). A new stream has no leader for a
    /// moment: the publish or the read finds no responder or none in time, and is retried.
    private static func ensureSalt(_ admin: NATSAdminConnection, stream: String, subject: String) throws(NATSError) -> String {
        let identifier = "\(subject) of stream \(stream)"
        var attempt = 1
        while true {
            do throws(NATSError) {
                try proposeSalt(admin, subject: subject, identifier: identifier)
                if let salt = try firstSalt(admin, stream: stream, subject: subject, identifier: identifier) {
                    return salt
                }
                // The proposal timed out unstored and nobody else's is stored yet.
                throw NATSError.notFound("$JS.API.STREAM.MSG.GET", identifier, text: "no salt stored")
            } catch  where attempt < 10 && (error.isTimeout || error.isNoResponders || error.isNotFound) {
                attempt += 1
                sleep(1)
            }
        }
    }

    /// Publishes a new salt to `subject` if it has no message; a timeout is not an error (the
    /// read that follows tells), nor is "wrong last sequence" (another client's is stored), nor
    /// "duplicate message id is in process" (another node's proposal, with the same message id,
    /// is being stored: the read that follows finds it, or finds none and asks again).
    private static func proposeSalt(_ admin: NATSAdminConnection, subject: String, identifier: String) throws(NATSError) {
        let proposal = Array(RoomSubjects.hex((0..<16).map { _ in UInt8.random(in: 0 ... .max) }).utf8)
        do throws(NATSError) {
            try admin.publish(
                subject: subject, payload: proposal,
                headers: [
                    // The header itself: libnats sends none for jsPubOptions.ExpectLastSubjectSeq = 0.
                    ("Nats-Expected-Last-Subject-Sequence", "0"),
                    // One message id for every node's proposal: within the duplicate window the
                    // stream stores only the first that arrives, even when the expectation above is
                    // not serialised, so nodes starting at once cannot push the first salt out of a
                    // small retention.
                    ("Nats-Msg-Id", subject),
                ], identifier: identifier)
        } catch  where error.isTimeout || error.isWrongLastSequence || error.isDuplicateInProcess {
            return
        }
    }

    /// The payload of the first message of `subject`, nil when it has none (JetStream's 404).
    private static func firstSalt(_ admin: NATSAdminConnection, stream: String, subject: String, identifier: String) throws(NATSError) -> String? {
        let operation = "$JS.API.STREAM.MSG.GET"
        let body = Array(#"{"seq":1,"next_by_subj":"\#(subject)"}"#.utf8)
        let data = try admin.request(subject: "\(operation).\(stream)", payload: body, identifier: "\(operation).\(stream) for \(identifier)")
        switch JetStreamAPIResponse.firstSalt(answer: data) {
        case .salt(let salt): return salt
        case .none: return nil
        case .refused(let why): throw NATSError.failed(operation, identifier, text: why)
        }
    }
}

extension StreamSpec {
    /// The rooms' stream: one subject per room under `snapsync.room.`, and the salt of every
    /// epoch on `snapsync.salt`, on 3 servers, the last `retain` messages of each subject kept
    /// (`retain` is at least 2, and only nodes starting at once store more than one salt).
    public static func rooms(retain: Int = 10_000) -> StreamSpec {
        StreamSpec(
            name: RoomSubjects.roomsStream, subjects: ["snapsync.room.>", RoomSubjects.saltSubject], replicas: 3,
            duplicateWindow: .seconds(120), maxMessagesPerSubject: retain, saltSubject: RoomSubjects.saltSubject)
    }

    /// The checkpoints' key-value bucket `snapsync-checkpoints` (its stream, as NATS key-value
    /// clients name and configure one): history 1, on 3 servers.
    public static let checkpoints = StreamSpec(
        name: "KV_snapsync-checkpoints", subjects: ["$KV.snapsync-checkpoints.>"], replicas: 3, duplicateWindow: .seconds(120),
        maxMessagesPerSubject: 1, keyValue: true)
}
