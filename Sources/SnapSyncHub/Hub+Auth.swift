// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif
import Logging
import SnapSyncAuth
import SnapSyncWire

// Authentication and per-room rights (docs/auth.md, PROTOCOL.md): the token of HELLO, the
// rights each request needs, AUTH replacing a session's token, and ending sessions whose token
// ran out. With `--auth off` (`configuration.authKeys` nil) none of this looks at anything:
// every check returns at its first line.

extension Hub {
    /// How many AUTHs' new tokens one connection may have verified within `authVerifyWindow`:
    /// a burst of refreshes (a client that rotates keys, a test) passes, a flood costs the loop
    /// about 1 ms per connection per window.
    static let authVerifyBurst = 4
    static let authVerifyWindow: Duration = .seconds(4)

    /// Checks HELLO's credentials when the daemon authenticates. On success the session has a
    /// principal and a deadline; on refusal it is closing with ERROR unauthorized.
    /// - Returns: whether the handshake may go on.
    ///
    /// A token, when HELLO carries one, is what is checked, client certificate or not (a refused
    /// token is refused: no falling back to the certificate). Without one, a client certificate
    /// the TLS handshake verified authenticates the session when `--tls-client-grant` gives
    /// certificates grants: its subject is the `sub`, its `notAfter` the expiry.
    func authenticate(_ session: Session, credentials: [UInt8]) -> Bool {
        guard let keys = configuration.authKeys else { return true }
        if credentials.isEmpty, let certificate = session.clientCertificate, let grants = configuration.tls?.clientCertificateGrants {
            let principal = Principal(subject: certificate.subject, expiresAt: certificate.expiresAt, grants: grants)
            grant(principal, to: session, keys: keys)
            session.isAuthenticatedByCertificate = true
            logger.info(
                "authenticated by client certificate",
                metadata: session.logMetadata(["exp": "\(principal.expiresAt.formatted(.iso8601))"]))
            return true
        }
        switch verify(credentials, with: keys) {
        case .success(let principal):
            grant(principal, to: session, keys: keys)
            session.heldToken = credentials
            logger.info(
                "authenticated",
                metadata: session.logMetadata([
                    "kid": "\(LogEscaping.line(principal.keyID))", "exp": "\(principal.expiresAt.formatted(.iso8601))",
                ]))
            return true
        case .failure(let refusal):
            refuse(session, "token refused: \(refusal)", cause: Self.cause(of: refusal), in: "HELLO")
            return false
        }
    }

    /// AUTH: the new token's grants and deadline replace the session's; every joined room the
    /// new grants cannot read is left, with a LEFT frame each, before the ACK. A refused token,
    /// or one for another `sub`, ends the session with ERROR unauthorized. Without
    /// authentication there are no grants to replace: ACK, the token not looked at.
    ///
    /// A signature check costs the loop 0.2–0.25 ms (ES256, EdDSA), so one connection pipelining
    /// AUTHs could stall every other: the token the session already holds is answered ACK
    /// without a check (O(token length) to compare), and a connection has at most
    /// `authVerifyBurst` new tokens checked per `authVerifyWindow`, REJECT `busy` beyond
    /// (PROTOCOL.md §8.4). A client refreshes its token once per lifetime, minutes apart; only a
    /// flood meets the bound.
    func reauthenticate(_ session: Session, requestID: UInt64, credentials: [UInt8]) {
        guard let keys = configuration.authKeys else {
            send(.ack(requestID: requestID, epoch: 0, version: 0), to: session)
            return
        }
        if let held = session.heldToken, held == credentials {
            send(.ack(requestID: requestID, epoch: 0, version: 0), to: session)
            return
        }
        let now = monotonicNow()
        session.authVerifications.removeAll { now - $0 >= Self.authVerifyWindow }
        guard session.authVerifications.count < Self.authVerifyBurst else {
            stats.requestsBusy += 1
            send(
                Rejection(
                    .busy,
                    "AUTH: this connection had \(Self.authVerifyBurst) new tokens verified in the last \(Self.authVerifyWindow), the most it may: retry later"
                ).message(requestID: requestID), to: session)
            return
        }
        session.authVerifications.append(now)
        let principal: Principal
        switch verify(credentials, with: keys) {
        case .success(let verified): principal = verified
        case .failure(let refusal):
            refuse(session, "token refused: \(refusal)", cause: Self.cause(of: refusal), in: "AUTH")
            return
        }
        // Byte for byte, as tokens are compared: `String`'s `!=` would let a canonically
        // equivalent spelling of the subject through.
        if let current = session.principal, !current.subject.utf8.elementsEqual(principal.subject.utf8) {
            refuse(
                session,
                "token refused: it is for \(quoted(principal.subject)), this session is \(quoted(current.subject)); a new subject needs a new connection",
                cause: "another subject", in: "AUTH")
            return
        }
        grant(principal, to: session, keys: keys)
        session.heldToken = credentials
        session.isAuthenticatedByCertificate = false
        // Sorted, so that the LEFT frames come in an order a client (and a test) can rely on.
        for name in session.memberships.names.sorted() where !principal.allows(.read, room: name) {
            guard let room = session.memberships[name] else { continue }
            removeMember(session, from: room, reason: .removed)
            send(.left(room: name, code: ErrorCode.forbidden.rawValue, message: denial(of: .read, room: name, to: session)), to: session)
        }
        send(.ack(requestID: requestID, epoch: 0, version: 0), to: session)
        logger.debug(
            "token replaced",
            metadata: session.logMetadata([
                "kid": "\(LogEscaping.line(principal.keyID))", "exp": "\(principal.expiresAt.formatted(.iso8601))",
            ]))
    }

    /// Whether the session's token gives `right` on `room`; if not, REJECT forbidden answers
    /// request `requestID`. Call it after the room name was validated and before anything else.
    /// - Complexity: O(1) without authentication; O(grants × name length) with it.
    func authorize(_ right: Right, room: String, requestID: UInt64, for session: Session) -> Bool {
        guard configuration.authKeys != nil else { return true }
        if let principal = session.principal, principal.allows(right, room: room) { return true }
        forbid(denial(of: right, room: room, to: session), requestID: requestID, to: session)
        return false
    }

    /// STATS is server-wide: it needs `admin` in a grant whose match is `*`.
    func authorizeStats(requestID: UInt64, for session: Session) -> Bool {
        guard configuration.authKeys != nil else { return true }
        if let principal = session.principal, principal.grants.contains(where: { $0.match == "*" && $0.rights.contains(.admin) }) {
            return true
        }
        forbid("\(credentialName(of: session)) grants no admin on every room (*), which STATS needs", requestID: requestID, to: session)
        return false
    }

    /// Ends, with ERROR token_expired, every session whose token ran out by `now` (its `exp`
    /// plus the leeway) without an AUTH. Called once a second by the daemon.
    /// - Complexity: O(1) when nothing is due; O(log n) per entry due.
    package func expireSessions(now: Date) {
        while let entry = tokenDeadlines.popDue(now: now) {
            // An entry of a session that ended, or whose token an AUTH replaced, is stale.
            guard let session = sessions[entry.sessionID], session.authDeadline == entry.deadline, session.state == .ready else {
                continue
            }
            stats.tokensExpired += 1
            let expiry = session.principal?.expiresAt.formatted(.iso8601) ?? "?"
            logLimited(.info, cause: "token expired", "token expired, closing", metadata: session.logMetadata(["exp": "\(expiry)"]))
            close(session, error: .tokenExpired, "the \(credentialName(of: session)) expired at \(expiry) and no AUTH replaced it")
        }
    }

    // MARK: Helpers

    /// What kind of refusal, for the log's rate limit: a fixed name per case, without the
    /// client's strings or dates the description carries.
    static func cause(of refusal: TokenRefusal) -> String {
        switch refusal {
        case .missing: "missing"
        case .malformed(let part, _): "malformed \(part.rawValue)"
        case .algorithmNone: "alg none"
        case .unknownKeyID: "unknown kid"
        case .algorithmNotAllowed: "alg not allowed"
        case .badSignature: "bad signature"
        case .expired: "expired"
        case .notYetValid: "not yet valid"
        case .issuedInTheFuture: "issued in the future"
        case .wrongAudience: "wrong audience"
        }
    }

    /// The token in `credentials` (UTF-8, compact form) checked now.
    private func verify(_ credentials: [UInt8], with keys: AuthKeyStore) -> Result<Principal, TokenRefusal> {
        let token = String(decoding: credentials, as: UTF8.self)
        // Decoding replaced invalid sequences if the bytes differ now.
        guard token.utf8.elementsEqual(credentials) else {
            return .failure(.malformed(part: .encoding, reason: "not UTF-8"))
        }
        do {
            return .success(try keys.verify(token, now: wallClock()))
        } catch {
            return .failure(error)
        }
    }

    /// Gives `session` the principal and its deadline (`exp` plus the leeway).
    private func grant(_ principal: Principal, to session: Session, keys: AuthKeyStore) {
        let leeway = Double(keys.leeway.components.seconds) + Double(keys.leeway.components.attoseconds) / 1e18
        let deadline = principal.expiresAt.addingTimeInterval(leeway)
        session.principal = principal
        // The same deadline again (the same token sent twice) needs no second entry.
        guard session.authDeadline != deadline else { return }
        session.authDeadline = deadline
        tokenDeadlines.push(deadline, sessionID: session.id)
        // Live entries (one per session) are at most `sessions.count`; the rest are stale.
        if tokenDeadlines.count > 2 * sessions.count + 64 {
            tokenDeadlines.compact { sessions[$0.sessionID]?.authDeadline == $0.deadline }
        }
    }

    /// A refused token: counted, logged with its reason (never the token), ERROR unauthorized.
    /// The log is limited per `cause` and request (`logLimited`): a client can send refused
    /// tokens as fast as it can connect.
    private func refuse(_ session: Session, _ reason: String, cause: String, in request: String) {
        stats.authRefused += 1
        logLimited(
            .info, cause: "token refused (\(request)): \(cause)", "token refused, closing",
            metadata: session.logMetadata(["request": "\(request)", "reason": "\(LogEscaping.line(reason))"]))
        close(session, error: .unauthorized, reason)
    }

    /// REJECT forbidden: nothing applied, nothing else sent.
    private func forbid(_ message: String, requestID: UInt64, to session: Session) {
        stats.forbidden += 1
        logger.debug("request forbidden", metadata: session.logMetadata(["reason": "\(LogEscaping.line(message))"]))
        send(Rejection(.forbidden, message).message(requestID: requestID), to: session)
    }

    /// "token of alice grants no write on room board:2"; "certificate of CN=alice grants ..."
    /// for a session authenticated by its client certificate.
    private func denial(of right: Right, room: String, to session: Session) -> String {
        "\(credentialName(of: session)) grants no \(right.rawValue) on room \(LogEscaping.line(room))"
    }

    /// "token of alice", "certificate of CN=alice,O=Example", or "token of nobody".
    private func credentialName(of session: Session) -> String {
        let subject = session.principal.map { LogEscaping.line($0.subject) } ?? "nobody"
        return "\(session.isAuthenticatedByCertificate ? "certificate" : "token") of \(subject)"
    }

    private func quoted(_ text: String) -> String { "\"\(LogEscaping.line(text))\"" }
}
