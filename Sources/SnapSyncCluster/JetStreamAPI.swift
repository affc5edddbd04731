internal import Foundation

// The few JetStream API messages a room's follow sends and reads (Protocol/CLUSTER.md,
// "Following a room"), as NATS's JetStream API defines them (JSON over core NATS requests to
// `$JS.API.*`), and the metadata JetStream puts in a delivery's reply subject.

/// `$JS.API.CONSUMER.CREATE.<stream>`'s request: an ephemeral push consumer of one room subject.
struct ConsumerCreateRequest: Encodable {
    struct Config: Encodable {
        var deliver_subject: String
        var deliver_policy = "by_start_sequence"
        var opt_start_seq: UInt64
        var ack_policy = "none"
        var filter_subject: String
        var replay_policy = "instant"
        /// Nanoseconds.
        var idle_heartbeat: Int64
        /// Nanoseconds.
        var inactive_threshold: Int64
        var mem_storage = true
    }

    var stream_name: String
    var config: Config

    func encoded() -> [UInt8] {
        // Encoding a struct of strings and integers cannot fail.
        (try? Array(JSONEncoder().encode(self))) ?? []
    }
}

/// The answer to a JetStream API request: `error`, or the created consumer's `name` and server,
/// or a stored message. (A creation's `num_pending` is not read: it is the consumer's view, which
/// may lag the stream's leader; the follow waits for `lastSequence` instead.)
struct JetStreamAPIResponse: Decodable {
    struct APIError: Decodable {
        var code: Int
        var err_code: Int?
        var description: String?
    }

    struct Cluster: Decodable {
        var leader: String?
    }

    /// `$JS.API.STREAM.MSG.GET`'s answer: the stored message (its payload in base64).
    struct StoredMessage: Decodable {
        var seq: UInt64
        var data: String?
    }

    var error: APIError?
    var message: StoredMessage?
    var name: String?
    /// Where the consumer runs: its server's name.
    var cluster: Cluster?

    /// Nil when `bytes` is not such a JSON object.
    static func decode(_ bytes: [UInt8]) -> JetStreamAPIResponse? {
        try? JSONDecoder().decode(JetStreamAPIResponse.self, from: Data(bytes))
    }

    /// What a `$JS.API.STREAM.MSG.GET` of the salt subject's first message answered.
    enum SaltAnswer: Equatable {
        case salt(String)
        /// JetStream's 404: the subject has no message.
        case none
        case refused(String)
    }

    /// The salt in `answer`: a payload of 32 lowercase hex digits, as every node writes it.
    static func firstSalt(answer: [UInt8]) -> SaltAnswer {
        guard let response = decode(answer) else { return .refused("an answer that is not JSON") }
        if let message = response.message {
            let payload = message.data.flatMap { Data(base64Encoded: $0) }.map { String(decoding: $0, as: UTF8.self) } ?? ""
            guard payload.utf8.count == 32, payload.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                return .refused("the first salt, at sequence \(message.seq), is not 32 lowercase hex digits: \(payload.debugDescription)")
            }
            return .salt(payload)
        }
        if let error = response.error, error.code == 404, error.err_code == JetStreamAPIResponse.noMessageFound { return .none }
        return .refused(response.errorText ?? "an answer with neither a message nor an error")
    }

    /// The `err_code` of "no message found" (a 404 of `STREAM.MSG.GET`); a missing stream is a
    /// 404 too (10059), which must not read as an empty subject.
    static let noMessageFound = 10037

    var errorText: String? {
        error.map { "\($0.description ?? "error") (code \($0.code), err_code \($0.err_code ?? 0))" }
    }
}

/// What JetStream says about one delivered message in its reply subject:
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>`,
/// or the longer form with a domain and an account hash after `$JS.ACK` (and a token at the end).
struct DeliveryMetadata: Equatable {
    var consumer: String
    var streamSequence: UInt64
    var consumerSequence: UInt64
    /// Messages of the consumer's subject stored after this one, as of its delivery.
    var pending: UInt64

    init?(replySubject: String) {
        let tokens = replySubject.split(separator: ".", omittingEmptySubsequences: false)
        guard tokens.count >= 9, tokens[0] == "$JS", tokens[1] == "ACK" else { return nil }
        let base: Int
        switch tokens.count {
        case 9: base = 2
        case 11, 12: base = 4
        default: return nil
        }
        guard let streamSequence = UInt64(tokens[base + 3]), let consumerSequence = UInt64(tokens[base + 4]),
            let pending = UInt64(tokens[base + 6])
        else { return nil }
        self.consumer = String(tokens[base + 1])
        self.streamSequence = streamSequence
        self.consumerSequence = consumerSequence
        self.pending = pending
    }

    init(consumer: String, streamSequence: UInt64, consumerSequence: UInt64, pending: UInt64) {
        self.consumer = consumer
        self.streamSequence = streamSequence
        self.consumerSequence = consumerSequence
        self.pending = pending
    }
}
