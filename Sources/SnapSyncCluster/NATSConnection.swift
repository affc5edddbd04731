internal import CNats
package import SnapSyncLoop

#if canImport(Glibc)
    internal import Glibc
#endif

/// A libnats connection whose socket I/O runs on the daemon's libevent loop, publishing to
/// JetStream asynchronously. The only Swift file that imports CNats.
///
/// Threads: libnats reads and writes the socket from the loop's callbacks, but runs message
/// handlers and publish acknowledgements on its shared delivery thread (and its timers,
/// reconnects on threads of its own). Those hand every outcome
/// to the loop through a `LoopMailbox`, so `publish`'s completion runs on the loop thread, like
/// everything else in the daemon. Every method is for the loop thread.
///
/// Never call a blocking libnats request (`js_AddStream`, `natsConnection_Request`, a
/// synchronous `js_Publish`) on this connection from the loop thread: its reply would be read by
/// the loop that the call is blocking, so it could only time out. Stream management therefore
/// goes through `NATSAdminConnection` (`StreamProvisioning`), a connection of its own, before the
/// loop runs.
///
/// This file is the libnats C boundary: thin calls, each status checked in `natsCheck`. What
/// SnapSync does with them (its streams and their salt, the rooms' subjects and records) is
/// its callers' (`StreamProvisioning`, `JetStreamRoomLog`).
public final class NATSConnection {
    private var connection: OpaquePointer?
    private var jetStream: OpaquePointer?
    private var mailbox: LoopMailbox<LoopDelivery>?
    /// Kept alive as long as the connection, whose socket's events libnats adds to it.
    private let loop: EventLoop
    /// The publishes awaiting JetStream's answer, by message id: O(1) per publish and per ack.
    private var pending: [String: (Result<PublishAck, NATSError>) -> Void] = [:]
    /// The subject prefix of this connection's reply inbox: every subject under
    /// `inboxPrefix + "."` reaches `onMessage` (one wildcard subscription, made at connect).
    let inboxPrefix: String
    /// Loop thread: every message of the inbox and of the `subscribe`d subjects, in arrival order.
    var onMessage: ((InboxMessage) -> Void)?
    /// Loop thread: the connection was lost (`nil`; libnats reconnects, forever) or made again
    /// (the server's URL). Messages sent to the node meanwhile are lost; publishes are retried
    /// by libnats from its buffer.
    public var onConnectionChange: ((_ reconnectedTo: String?) -> Void)?
    private var inboxSubscription: OpaquePointer?
    /// By libnats's subscription id.
    private var subscriptions: [UInt64: OpaquePointer] = [:]
    /// The mailbox, retained for ever, as the subscriptions' and the ack handler's closure.
    private var handlerClosure: UnsafeMutableRawPointer?

    /// Connects to any of `servers` (`nats://host:port` URLs, or all `tls://host:port` with
    /// `tls`; libnats reconnects to the others, forever, when one goes away) with the socket on
    /// `loop`, made with locking after `EventLoop.enableThreadedAccess()`. Blocks for the
    /// handshake only.
    package init(servers: [String], tls: NATSTLS = NATSTLS(), loop: EventLoop, name: String = "snapsyncd") throws(NATSError) {
        let identifier = NATSURLRedaction.redacted(servers)
        self.loop = loop
        mailbox = nil
        var inbox: UnsafeMutablePointer<natsInbox>?
        try natsCheck(natsInbox_Create(&inbox), "natsInbox_Create", identifier)
        inboxPrefix = inbox.map { String(cString: $0) } ?? ""
        natsInbox_Destroy(inbox)
        let options = try Self.makeOptions(servers: servers, tls: tls, name: name, identifier: identifier)
        defer { natsOptions_Destroy(options) }
        guard let options else { preconditionFailure("natsOptions_Create succeeded without options") }
        try natsCheck(natsStatus(rawValue: UInt32(bitPattern: loop.attachNATS(options: options))), "natsOptions_SetEventLoop", identifier)
        try natsCheck(natsOptions_SetMaxReconnect(options, -1), "natsOptions_SetMaxReconnect", identifier)
        // Every subscription (the inbox, JetStream's acks, one per followed room) is delivered by
        // libnats's shared delivery pool (one thread by default) instead of a thread of its own:
        // a node following thousands of rooms would otherwise run thousands of threads. libnats
        // keeps each subscription's order (a subscription is bound to one worker), and every
        // handler only copies the message into the mailbox, in arrival order, so the loop sees
        // each subscription's messages in order as before.
        try natsCheck(natsOptions_UseGlobalMessageDelivery(options, true), "natsOptions_UseGlobalMessageDelivery", identifier)

        // The mailbox calls back into `self`, weakly: it can outlive the connection by a post.
        // At the flush's priority, libevent's default on the daemon's base of two priorities,
        // which this event has always had: a pass runs the deliveries after its reads, accepts and
        // timers, with the flush that sends what they queued.
        let mailbox: LoopMailbox<LoopDelivery>
        do {
            mailbox = try LoopMailbox(loop: loop, priority: .flush) { [weak self] delivery in self?.deliver(delivery) }
        } catch {
            throw NATSError(operation: error.function, identifier: "loop mailbox", code: .status(0), text: "libevent could not make an event")
        }
        self.mailbox = mailbox
        // Retained here and never released: libnats may still be inside a handler, on one of
        // its threads, after natsConnection_Destroy returns (only the process-wide
        // nats_CloseAndWait waits for those), so freeing the mailbox could be a use after free.
        // One small object per connection; the daemon has one connection.
        handlerClosure = Unmanaged.passRetained(mailbox).toOpaque()
        try natsCheck(natsOptions_SetDisconnectedCB(options, disconnectedHandler, handlerClosure), "natsOptions_SetDisconnectedCB", identifier)
        try natsCheck(natsOptions_SetReconnectedCB(options, reconnectedHandler, handlerClosure), "natsOptions_SetReconnectedCB", identifier)
        try Self.connect(&connection, options, servers: servers, identifier: identifier)

        var jsOptions = jsOptions()
        try natsCheck(jsOptions_Init(&jsOptions), "jsOptions_Init", identifier)
        jsOptions.PublishAsync.AckHandler = publishAckHandler
        jsOptions.PublishAsync.AckHandlerClosure = handlerClosure
        try natsCheck(natsConnection_JetStream(&jetStream, connection, &jsOptions), "natsConnection_JetStream", identifier)

        // One subscription for every reply of this connection.
        inboxSubscription = try makeSubscription(inboxPrefix + ".>")
    }

    /// A new subject prefix (`_INBOX.<unique>`), outside `inboxPrefix`.
    func makeInbox() throws(NATSError) -> String {
        var inbox: UnsafeMutablePointer<natsInbox>?
        try natsCheck(natsInbox_Create(&inbox), "natsInbox_Create", inboxPrefix)
        defer { natsInbox_Destroy(inbox) }
        return inbox.map { String(cString: $0) } ?? ""
    }

    /// Subscribes to the literal `subject`: its messages reach `onMessage` until `unsubscribe`.
    /// A push consumer needs one for its deliver subject: nats-server 2.9 counts only a literal
    /// subscription as interest in it (under a wildcard one such as the inbox's, the consumer
    /// is created and never delivers; checked).
    /// Returns the subscription's id, which its messages carry (`InboxMessage.subscription`).
    func subscribe(_ subject: String) throws(NATSError) -> UInt64 {
        let subscription = try makeSubscription(subject)
        let id = UInt64(natsSubscription_GetID(subscription))
        subscriptions[id] = subscription
        return id
    }

    /// Ends a `subscribe`; messages already received may still reach `onMessage`.
    func unsubscribe(_ id: UInt64) {
        guard let subscription = subscriptions.removeValue(forKey: id) else { return }
        natsSubscription_Unsubscribe(subscription)
        natsSubscription_Destroy(subscription)
    }

    private func makeSubscription(_ subject: String) throws(NATSError) -> OpaquePointer? {
        guard let connection else { throw natsError(NATS_CONNECTION_CLOSED, "natsConnection_Subscribe", subject, jsErrCode(0), text: nil) }
        var subscription: OpaquePointer?
        // The handler's closure is the mailbox, never released: a message being handled on a
        // libnats thread after the subscription's end still finds it.
        try natsCheck(natsConnection_Subscribe(&subscription, connection, subject, messageHandler, handlerClosure), "natsConnection_Subscribe", subject)
        // No pending limit: a follow's catch-up is bounded by the subject's retained records,
        // and a message dropped here would cost the consumer's recreation.
        do throws(NATSError) {
            try natsCheck(natsSubscription_SetPendingLimits(subscription, -1, -1), "natsSubscription_SetPendingLimits", subject)
        } catch {
            natsSubscription_Destroy(subscription)
            throw error
        }
        return subscription
    }

    /// The largest message the servers accept (`max_payload`, headers included), in bytes.
    public var maxPayload: Int {
        guard let connection else { return 0 }
        return Int(natsConnection_GetMaxPayload(connection))
    }

    deinit {
        close()
    }

    /// Closes the connection; publishes still pending complete with a `NATS_CONNECTION_CLOSED`
    /// error. Loop thread.
    public func close() {
        guard let connection else {
            // An init that failed to connect (cluster mode's start tries again, with a new
            // connection): its mailbox's event must not stay on the loop.
            mailbox?.close()
            mailbox = nil
            return
        }
        for subscription in subscriptions.values { natsSubscription_Destroy(subscription) }
        subscriptions.removeAll()
        natsSubscription_Destroy(inboxSubscription)
        inboxSubscription = nil
        onMessage = nil
        onConnectionChange = nil
        jsCtx_Destroy(jetStream)
        jetStream = nil
        natsConnection_Destroy(connection)
        self.connection = nil
        // Later posts (a handler still running) are queued and never delivered.
        mailbox?.close()
        mailbox = nil
        let failed = pending
        pending.removeAll()
        for (id, completion) in failed {
            completion(.failure(natsError(NATS_CONNECTION_CLOSED, "js_PublishMsgAsync", id, jsErrCode(0), text: nil)))
        }
    }

    /// Publishes `payload` to `subject` without waiting: JetStream stores it only if the
    /// subject's last message is `expectedLastSubjectSequence` (0: the subject has none) and no
    /// message with `messageID` was stored within the stream's duplicate window.
    ///
    /// `completion` runs later on the loop thread, exactly once: the ack, or the refusal (e.g.
    /// `isWrongLastSequence`), or `NATS_TIMEOUT` after `timeout` without an answer (then the
    /// message may still be stored: retry with the same `messageID`). Throws, without calling
    /// `completion`, when libnats would not queue it or `messageID` is still pending.
    public func publish(
        subject: String, payload: [UInt8], expectedLastSubjectSequence: UInt64?, messageID: String,
        timeout: Duration = .seconds(5), completion: @escaping (Result<PublishAck, NATSError>) -> Void
    ) throws(NATSError) {
        let identifier = "\(subject) \(messageID)"
        guard let jetStream else { throw natsError(NATS_CONNECTION_CLOSED, "js_PublishMsgAsync", identifier, jsErrCode(0), text: nil) }
        guard pending[messageID] == nil else {
            throw NATSError(
                operation: "js_PublishMsgAsync", identifier: identifier, code: .status(NATS_ILLEGAL_STATE.rawValue),
                text: "a publish with this message id is pending")
        }
        var message: OpaquePointer?
        let created = payload.withUnsafeBufferPointer { buffer in
            natsMsg_Create(&message, subject, nil, UnsafeRawPointer(buffer.baseAddress)?.assumingMemoryBound(to: CChar.self), Int32(buffer.count))
        }
        try natsCheck(created, "natsMsg_Create", identifier)
        // js_PublishMsgAsync takes the message on success and sets `message` to nil.
        defer { natsMsg_Destroy(message) }
        // jsPubOptions.ExpectLastSubjectSeq = 0 means "no expectation" to libnats, which then
        // sends no header; JetStream reads a header of 0 as "the subject has no message", which
        // is what a room's first write needs. So the header itself, always.
        if let expectedLastSubjectSequence {
            try natsCheck(
                natsMsgHeader_Set(message, "Nats-Expected-Last-Subject-Sequence", String(expectedLastSubjectSequence)),
                "natsMsgHeader_Set", identifier)
        }
        let id = strdup(messageID)
        defer { free(id) }
        var options = jsPubOptions()
        try natsCheck(jsPubOptions_Init(&options), "jsPubOptions_Init", identifier)
        options.MsgId = UnsafePointer(id)
        options.MaxWait = timeout.milliseconds
        try natsCheck(js_PublishMsgAsync(jetStream, &message, &options), "js_PublishMsgAsync", identifier)
        pending[messageID] = completion
    }

    /// Publishes `payload` to `subject` (core NATS, not acknowledged), with `reply` as its reply
    /// subject when not empty: a request whose answer comes to the inbox (`onMessage`)
    /// when `reply` is under `inboxPrefix`. Never waits for an answer; the bytes leave with the
    /// loop's next write. Throws when libnats refuses it (closed, too large).
    func send(subject: String, reply: String, payload: [UInt8]) throws(NATSError) {
        guard let connection else { throw natsError(NATS_CONNECTION_CLOSED, "natsConnection_PublishRequest", subject, jsErrCode(0), text: nil) }
        let status = payload.withUnsafeBufferPointer { buffer in
            reply.isEmpty
                ? natsConnection_Publish(connection, subject, buffer.baseAddress, Int32(buffer.count))
                : natsConnection_PublishRequest(connection, subject, reply, buffer.baseAddress, Int32(buffer.count))
        }
        try natsCheck(status, "natsConnection_PublishRequest", subject)
    }

    private func deliver(_ delivery: LoopDelivery) {
        switch delivery {
        case let .published(messageID, result):
            pending.removeValue(forKey: messageID)?(result)
        case let .inbox(message):
            onMessage?(message)
        case let .connection(url):
            onConnectionChange?(url)
        }
    }

    /// The options every connection of the node starts from (the loop's and the admin one's
    /// alike): the servers, the name, and TLS as `servers`' scheme and `tls` say.
    fileprivate static func makeOptions(servers: [String], tls: NATSTLS, name: String, identifier: String) throws(NATSError) -> OpaquePointer? {
        guard let secure = NATSTLS.required(by: servers) else {
            throw NATSError(
                operation: "natsOptions_SetSecure", identifier: identifier, code: .status(NATS_INVALID_ARG.rawValue),
                text: "nats:// and tls:// URLs mixed: TLS is required of every server or of none")
        }
        guard secure || tls.isEmpty else {
            throw NATSError(
                operation: "natsOptions_SetSecure", identifier: identifier, code: .status(NATS_INVALID_ARG.rawValue),
                text: "TLS certificate files given for nats:// URLs: they need tls:// URLs")
        }
        var options: OpaquePointer?
        try natsCheck(natsOptions_Create(&options), "natsOptions_Create", identifier)
        do throws(NATSError) {
            let urls = servers.map { strdup($0) }
            defer { for u in urls { free(u) } }
            var pointers = urls.map { UnsafePointer($0) }
            try natsCheck(natsOptions_SetServers(options, &pointers, Int32(pointers.count)), "natsOptions_SetServers", identifier)
            try natsCheck(natsOptions_SetName(options, name), "natsOptions_SetName", identifier)
            if secure { try applyTLS(tls, to: options, identifier: identifier) }
        } catch {
            natsOptions_Destroy(options)
            throw error
        }
        return options
    }

    /// `natsConnection_Connect`, its failure explained when libnats's own text does not say it.
    fileprivate static func connect(
        _ connection: inout OpaquePointer?, _ options: OpaquePointer?, servers: [String], identifier: String
    ) throws(NATSError) {
        do throws(NATSError) {
            try natsCheck(natsConnection_Connect(&connection, options), "natsConnection_Connect", identifier)
        } catch  where NATSTLS.required(by: servers) == true && error.text.contains("Expected 'PONG', got ''") {
            // A server that verifies clients accepts the TLS 1.3 handshake, then closes the
            // connection of a client without a certificate it trusts: libnats only sees the
            // connection end where the first PONG should be.
            throw NATSError(
                operation: error.operation, identifier: error.identifier, code: error.code,
                text: "\(error.text): the server closed the TLS connection; it may require a client certificate it trusts")
        }
    }

    /// libnats takes the URL's `tls://` for `nats://`: without `natsOptions_SetSecure` it
    /// connects in plaintext to a server that does not ask for TLS. Set, the connection fails
    /// (`NATS_SECURE_CONNECTION_WANTED`) unless the server offers TLS, and the handshake verifies
    /// the server: OpenSSL's `SSL_VERIFY_PEER` checks the chain (signatures, validity dates) up to
    /// a root of the system's store or of `trustedCertificatesFile`, and, libnats 3.4 being
    /// built with `NATS_BUILD_TLS_FORCE_HOST_VERIFY` (its default; Debian's), `SSL_set1_host`
    /// checks that the certificate names the URL's host (a DNS or IP subject alternative name,
    /// no partial wildcards). Server verification is never skipped. The files are read here, so
    /// a missing or malformed one fails before any connection, naming it.
    private static func applyTLS(_ tls: NATSTLS, to options: OpaquePointer?, identifier: String) throws(NATSError) {
        try natsCheck(natsOptions_SetSecure(options, true), "natsOptions_SetSecure", identifier)
        if let file = tls.trustedCertificatesFile {
            try natsCheck(natsOptions_LoadCATrustedCertificates(options, file), "natsOptions_LoadCATrustedCertificates", file)
        }
        if tls.certificateChainFile != nil || tls.privateKeyFile != nil {
            guard let chain = tls.certificateChainFile, let key = tls.privateKeyFile else {
                throw NATSError(
                    operation: "natsOptions_LoadCertificatesChain", identifier: identifier, code: .status(NATS_INVALID_ARG.rawValue),
                    text: "a client certificate needs both its chain and its key")
            }
            try natsCheck(natsOptions_LoadCertificatesChain(options, chain, key), "natsOptions_LoadCertificatesChain", "\(chain) \(key)")
        }
    }
}

/// A short-lived, blocking libnats connection on libnats's own threads, for what cluster mode
/// does before its loop runs (`StreamProvisioning`): stream management, and a publish and a
/// request that wait for their answer. Never on the loop thread (`NATSConnection`'s doc says why).
final class NATSAdminConnection {
    private var connection: OpaquePointer?
    private var jetStream: OpaquePointer?
    private let timeoutMilliseconds: Int64

    /// Connects to any of `servers` as `snapsyncd-admin` (TLS as `NATSConnection`'s), every call
    /// waiting at most `timeout` for its answer (`natsOptions_SetTimeout`, `jsOptions.Wait`).
    init(servers: [String], tls: NATSTLS, timeout: Duration, identifier: String) throws(NATSError) {
        timeoutMilliseconds = timeout.milliseconds
        let options = try NATSConnection.makeOptions(servers: servers, tls: tls, name: "snapsyncd-admin", identifier: identifier)
        defer { natsOptions_Destroy(options) }
        try natsCheck(natsOptions_SetTimeout(options, timeoutMilliseconds), "natsOptions_SetTimeout", identifier)
        try NATSConnection.connect(&connection, options, servers: servers, identifier: "\(NATSURLRedaction.redacted(servers)) for \(identifier)")
        var jsOptions = jsOptions()
        try natsCheck(jsOptions_Init(&jsOptions), "jsOptions_Init", identifier)
        jsOptions.Wait = timeoutMilliseconds
        try natsCheck(natsConnection_JetStream(&jetStream, connection, &jsOptions), "natsConnection_JetStream", identifier)
    }

    /// Also after a failed `init`, with whatever it had made.
    deinit {
        if let jetStream { jsCtx_Destroy(jetStream) }
        if let connection { natsConnection_Destroy(connection) }
    }

    /// `js_AddStream` of `spec` (file storage); when a stream of that name exists with another
    /// configuration, `js_GetStreamInfo` (to tell whether its `max_msgs_per_subject` changes) then
    /// `js_UpdateStream`. `spec.saltSubject` is not JetStream's: the returned `salt` is nil.
    func addOrUpdateStream(_ spec: StreamSpec, identifier: String) throws(NATSError) -> StreamInfo {
        let name = strdup(spec.name)
        let copies = spec.subjects.map { strdup($0) }
        defer {
            free(name)
            for s in copies { free(s) }
        }
        let subjects = copies.map { UnsafePointer($0) }
        var config = jsStreamConfig()
        try natsCheck(jsStreamConfig_Init(&config), "jsStreamConfig_Init", identifier)
        config.Name = UnsafePointer(name)
        config.Storage = js_FileStorage
        config.Replicas = Int64(spec.replicas)
        config.Duplicates = spec.duplicateWindow.nanoseconds
        config.MaxMsgsPerSubject = spec.maxMessagesPerSubject.map(Int64.init) ?? -1
        if spec.keyValue {
            config.AllowDirect = true
            config.AllowRollup = true
            config.DenyDelete = true
            config.Discard = js_DiscardNew
        }
        let js = jetStream
        return try subjects.withUnsafeBufferPointer { (buffer) throws(NATSError) -> StreamInfo in
            config.Subjects = UnsafeMutablePointer(mutating: buffer.baseAddress)
            config.SubjectsLen = Int32(buffer.count)
            var info: UnsafeMutablePointer<jsStreamInfo>?
            defer { jsStreamInfo_Destroy(info) }
            var errorCode = jsErrCode(0)
            let added = js_AddStream(&info, js, &config, nil, &errorCode)
            var replaced: Int64?
            if errorCode.rawValue == NATSError.streamNameExists {
                jsStreamInfo_Destroy(info)
                info = nil
                // The configuration it has, to tell what the update changes.
                errorCode = jsErrCode(0)
                try natsCheck(js_GetStreamInfo(&info, js, config.Name, nil, &errorCode), "js_GetStreamInfo", identifier, errorCode)
                let before = info?.pointee.Config?.pointee.MaxMsgsPerSubject
                if let before, before != config.MaxMsgsPerSubject { replaced = before }
                jsStreamInfo_Destroy(info)
                info = nil
                errorCode = jsErrCode(0)
                let updated = js_UpdateStream(&info, js, &config, nil, &errorCode)
                try natsCheck(updated, "js_UpdateStream", identifier, errorCode)
            } else {
                try natsCheck(added, "js_AddStream", identifier, errorCode)
            }
            guard let info else {
                throw NATSError(operation: "js_AddStream", identifier: identifier, code: .status(NATS_ERR.rawValue), text: "no stream info")
            }
            return StreamInfo(
                salt: nil, leader: info.pointee.Cluster?.pointee.Leader.map { String(cString: $0) },
                replacedMaxMessagesPerSubject: replaced)
        }
    }

    /// `js_PublishMsg` of `payload` to `subject` with `headers` (`natsMsgHeader_Set`, in order),
    /// waiting for JetStream's answer: its ack, or its refusal (e.g. `isWrongLastSequence`), or a
    /// timeout (`isTimeout`; the message may still be stored).
    @discardableResult
    func publish(subject: String, payload: [UInt8], headers: [(name: String, value: String)], identifier: String) throws(NATSError) -> PublishAck {
        var message: OpaquePointer?
        let created = payload.withUnsafeBufferPointer { buffer in
            natsMsg_Create(&message, subject, nil, UnsafeRawPointer(buffer.baseAddress)?.assumingMemoryBound(to: CChar.self), Int32(buffer.count))
        }
        try natsCheck(created, "natsMsg_Create", identifier)
        defer { natsMsg_Destroy(message) }
        for (name, value) in headers {
            try natsCheck(natsMsgHeader_Set(message, name, value), "natsMsgHeader_Set", identifier)
        }
        var ack: UnsafeMutablePointer<jsPubAck>?
        defer { jsPubAck_Destroy(ack) }
        var errorCode = jsErrCode(0)
        let status = js_PublishMsg(&ack, jetStream, message, nil, &errorCode)
        // No responders: libnats also sets the code of "JetStream not enabled", which is not
        // what a stream without a leader yet means; the status says it (`isNoResponders`).
        try natsCheck(status, "js_PublishMsg", identifier, status == NATS_NO_RESPONDERS ? jsErrCode(0) : errorCode)
        guard let ack else {
            throw NATSError(operation: "js_PublishMsg", identifier: identifier, code: .status(NATS_ERR.rawValue), text: "no ack")
        }
        return PublishAck(stream: ack.pointee.Stream.map { String(cString: $0) } ?? "", sequence: ack.pointee.Sequence, duplicate: ack.pointee.Duplicate)
    }

    /// `natsConnection_Request`: sends `payload` to `subject` and waits for the reply's payload.
    func request(subject: String, payload: [UInt8], identifier: String) throws(NATSError) -> [UInt8] {
        var reply: OpaquePointer?
        let status = payload.withUnsafeBufferPointer { buffer in
            natsConnection_Request(&reply, connection, subject, buffer.baseAddress, Int32(buffer.count), timeoutMilliseconds)
        }
        try natsCheck(status, "natsConnection_Request", identifier)
        defer { natsMsg_Destroy(reply) }
        let count = Int(natsMsg_GetDataLength(reply))
        var data = [UInt8](repeating: 0, count: count)
        if count > 0, let bytes = natsMsg_GetData(reply) {
            data.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: bytes, count: count)) }
        }
        return data
    }
}

/// libnats's publish-ack callback (jsOptions.PublishAsync.AckHandler), on a libnats thread: the
/// outcome goes to the loop through the mailbox in `closure`. O(1) besides the copies.
private let publishAckHandler: jsPubAckHandler = { _, message, ack, failure, closure in
    guard let closure else { return }
    let mailbox = Unmanaged<LoopMailbox<LoopDelivery>>.fromOpaque(closure).takeUnretainedValue()
    var idPointer: UnsafePointer<CChar>?
    let messageID = natsMsgHeader_Get(message, "Nats-Msg-Id", &idPointer) == NATS_OK ? idPointer.map { String(cString: $0) } ?? "" : ""
    let result: Result<PublishAck, NATSError>
    if let ack {
        result = .success(
            PublishAck(stream: ack.pointee.Stream.map { String(cString: $0) } ?? "", sequence: ack.pointee.Sequence, duplicate: ack.pointee.Duplicate))
    } else if let failure {
        let subject = natsMsg_GetSubject(message).map { String(cString: $0) } ?? "?"
        result = .failure(
            natsError(
                failure.pointee.Err, "js_PublishMsgAsync", "\(subject) \(messageID)", failure.pointee.ErrCode,
                text: failure.pointee.ErrText.map { String(cString: $0) } ?? String(cString: natsStatus_GetText(failure.pointee.Err))))
    } else {
        result = .failure(natsError(NATS_ERR, "js_PublishMsgAsync", messageID, jsErrCode(0), text: "neither an ack nor an error"))
    }
    natsMsg_Destroy(message)
    mailbox.post(.published(messageID: messageID, result))
}

/// libnats's disconnected callback, on its thread.
private let disconnectedHandler: natsConnectionHandler = { _, closure in
    guard let closure else { return }
    Unmanaged<LoopMailbox<LoopDelivery>>.fromOpaque(closure).takeUnretainedValue().post(.connection(reconnectedTo: nil))
}

/// libnats's reconnected callback, on its thread: with the URL of the server it reached.
private let reconnectedHandler: natsConnectionHandler = { connection, closure in
    guard let closure else { return }
    var buffer = [CChar](repeating: 0, count: 256)
    let url =
        natsConnection_GetConnectedUrl(connection, &buffer, buffer.count) == NATS_OK
        ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    Unmanaged<LoopMailbox<LoopDelivery>>.fromOpaque(closure).takeUnretainedValue().post(.connection(reconnectedTo: url))
}

/// The subscriptions' handler (natsMsgHandler), on a libnats thread: the message is copied
/// and handed to the loop through the mailbox in `closure`. O(size of the message).
private let messageHandler: natsMsgHandler = { _, subscription, message, closure in
    guard let closure, let message else { return }
    defer { natsMsg_Destroy(message) }
    let mailbox = Unmanaged<LoopMailbox<LoopDelivery>>.fromOpaque(closure).takeUnretainedValue()
    let count = Int(natsMsg_GetDataLength(message))
    var data = [UInt8](repeating: 0, count: count)
    if count > 0, let bytes = natsMsg_GetData(message) {
        data.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: bytes, count: count)) }
    }
    var status: String?
    var description: String?
    var lastConsumer: UInt64?
    var expected: UInt64?
    func header(_ key: String) -> String? {
        var value: UnsafePointer<CChar>?
        guard natsMsgHeader_Get(message, key, &value) == NATS_OK, let value else { return nil }
        return String(cString: value)
    }
    // Only status messages (no responders, not found, heartbeats) have a Status header; records
    // keep their publisher's headers, of which the follow reads the expectation.
    if let value = header("Status") {
        status = value
        description = header("Description")
        lastConsumer = header("Nats-Last-Consumer").flatMap { UInt64($0) }
    } else {
        expected = header("Nats-Expected-Last-Subject-Sequence").flatMap { UInt64($0) }
    }
    mailbox.post(
        .inbox(
            InboxMessage(
                subscription: UInt64(natsSubscription_GetID(subscription)),
                subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "",
                reply: natsMsg_GetReply(message).map { String(cString: $0) } ?? "",
                data: data, status: status, statusDescription: description, lastConsumerSequence: lastConsumer,
                expectedLastSubjectSequence: expected)))
}

/// Every libnats status is checked here: `NATS_OK` passes, anything else throws a `NATSError`
/// naming the call and the identifier (a JetStream error code when the server gave one).
private func natsCheck(_ status: natsStatus, _ operation: String, _ identifier: String, _ errorCode: jsErrCode = jsErrCode(0)) throws(NATSError) {
    if status == NATS_OK { return }
    throw natsError(status, operation, identifier, errorCode, text: nil)
}

/// The `NATSError` for a failed status: JetStream's code when set, libnats's last error text
/// (more precise than the status's) when `text` is nil, which only a synchronous call on this
/// thread may leave (the text is per thread).
private func natsError(_ status: natsStatus, _ operation: String, _ identifier: String, _ errorCode: jsErrCode, text: String?) -> NATSError {
    let last = nats_GetLastError(nil).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    var detail = text ?? last ?? String(cString: natsStatus_GetText(status))
    if status == NATS_SECURE_CONNECTION_WANTED {
        detail += ": the server does not offer TLS, which tls:// URLs require (never plaintext instead)"
    }
    let code: NATSError.Code = errorCode.rawValue != 0 ? .jetStream(errorCode.rawValue) : .status(status.rawValue)
    return NATSError(operation: operation, identifier: identifier, code: code, text: detail)
}

extension NATSError {
    /// libnats gave up waiting for the answer (`NATS_TIMEOUT`): the message may still be stored.
    public var isTimeout: Bool { code == .status(NATS_TIMEOUT.rawValue) }

    /// Nothing answered the request (`NATS_NO_RESPONDERS`): JetStream's API, or a stream, with no
    /// leader yet (a cluster or a stream just made, or without a quorum).
    var isNoResponders: Bool { code == .status(NATS_NO_RESPONDERS.rawValue) }

    /// `NATS_NOT_FOUND`, as `notFound` makes it.
    var isNotFound: Bool { code == .status(NATS_NOT_FOUND.rawValue) }

    /// A failure that servers give while they cannot serve *yet*, which cluster mode's start
    /// waits out (`ClusterStartRetry`): no server reachable (`NATS_NO_SERVER`: refused, or none
    /// answered its handshake in time), no answer in time, no responders, a connection lost
    /// meanwhile, a salt not stored yet (`notFound`), and JetStream without a leader or without
    /// enough servers for a stream's replicas (10008, 10009, 10005). Not an authentication or
    /// TLS failure, a bad argument, a refused server or another JetStream refusal: those are
    /// permanent.
    package var isTransientAtStart: Bool {
        switch code {
        case .status(let status):
            let transient = [
                NATS_NO_SERVER, NATS_TIMEOUT, NATS_NO_RESPONDERS, NATS_NOT_FOUND, NATS_CONNECTION_CLOSED, NATS_CONNECTION_DISCONNECTED,
            ]
            return transient.contains { $0.rawValue == status }
        case .jetStream(let code):
            return [NATSError.temporarilyUnavailable, NATSError.clusterNotLeader, NATSError.clusterNoPeers].contains(code)
        case .refusedServer, .startDeadline:
            return false
        }
    }

    /// An answer of `operation` that SnapSync cannot use, as libnats's generic failure
    /// (`NATS_ERR`), for code outside this file, which has no libnats status to give.
    static func failed(_ operation: String, _ identifier: String, text: String) -> NATSError {
        NATSError(operation: operation, identifier: identifier, code: .status(NATS_ERR.rawValue), text: text)
    }

    /// What `operation` should have found is not there (`NATS_NOT_FOUND`).
    static func notFound(_ operation: String, _ identifier: String, text: String) -> NATSError {
        NATSError(operation: operation, identifier: identifier, code: .status(NATS_NOT_FOUND.rawValue), text: text)
    }
}
