#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import Testing
import SnapSyncAuth
import SnapSyncWire

// Keys and tokens for the daemon's authentication tests (Auth*Tests.swift): key files written
// by the real `snapsyncd keygen`, tokens minted by the real `snapsyncd token` or, for claims the
// tool does not make (a past exp, an nbf, a foreign key), by SnapSyncAuth with the same file.

/// A directory with one ES256 key `k1`: `privateFile` (with d, for minting) and `publicFile`
/// (what the daemon gets), both written by `snapsyncd keygen`.
final class AuthKeyDirectory {
    let path: String
    var privateFile: String { path + "/private.json" }
    var publicFile: String { path + "/public.json" }

    init() throws {
        var template = Array((NSTemporaryDirectory() + "snapsync-auth-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw DaemonError("mkdtemp failed: errno \(errno)") }
        path = String(cString: made)
        try keygen(kid: "k1")
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// `snapsyncd keygen --alg ALG --kid KID --out private.json --public-out public.json`:
    /// adds a key to both files.
    func keygen(kid: String, alg: String = "ES256") throws {
        try Self.tool(["keygen", "--alg", alg, "--kid", kid, "--out", privateFile, "--public-out", publicFile])
    }

    /// `snapsyncd token --keys private.json --kid KID --sub SUB --room GRANT... [--aud AUD]`.
    func token(kid: String = "k1", sub: String = "alice", rooms: [String], aud: String? = nil) throws -> String {
        var arguments = ["token", "--keys", privateFile, "--kid", kid, "--sub", sub]
        for room in rooms { arguments += ["--room", room] }
        if let aud { arguments += ["--aud", aud] }
        return try Self.tool(arguments).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A token with any claims, signed with `kid` of the private file (or of `keys`).
    func mint(
        kid: String = "k1", sub: String = "alice", rooms: [String], expiresIn: Double = 3600, notBefore: Double? = nil,
        aud: [String] = [], keys: AuthKeySet? = nil
    ) async throws -> String {
        let now = Date()
        let claims = TokenClaims(
            subject: sub, expiresAt: now.addingTimeInterval(expiresIn), notBefore: notBefore.map(now.addingTimeInterval),
            issuedAt: now, audience: aud, grants: try rooms.map { try RoomGrant(spec: $0) })
        let signing: AuthKeySet
        if let keys {
            signing = keys
        } else {
            signing = try await AuthKeySet.load(contentsOf: privateFile)
        }
        return try await signing.mint(claims, keyID: kid)
    }

    /// Writes `publicFile` anew with only the keys `kids` of the private file (public parts).
    func keepOnly(_ kids: Set<String>) throws {
        let all = try JSONDecoder().decode(JSONWebKeySet.self, from: Data(contentsOf: URL(fileURLWithPath: privateFile)))
        let kept = all.keys.filter { kids.contains($0.kid) }.map(\.verificationOnly)
        let temporary = publicFile + ".new"
        try KeyFileWriter.render(kept).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, publicFile) == 0 else { throw DaemonError("rename failed: errno \(errno)") }
    }

    /// Runs `snapsyncd ARGUMENTS`; its output, or an error with it if it failed.
    @discardableResult
    static func tool(_ arguments: [String]) throws -> String {
        let (status, output) = try DaemonProcess.run(arguments: arguments)
        guard status == 0 else { throw DaemonError("snapsyncd \(arguments.first ?? "") exited with \(status)", log: output) }
        return output
    }
}

/// `header.payload.` with any header: what a client without any key can make.
func unsignedToken(header: [String: Any], payload: [String: Any]) throws -> String {
    func part(_ json: [String: Any]) throws -> String {
        try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys]).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
    return "\(try part(header)).\(try part(payload))."
}

extension RawClient {
    /// Connects and sends HELLO with `token` (nothing read).
    static func hello(_ daemon: DaemonProcess, token: String) throws -> RawClient {
        let client = try RawClient(host: daemon.host, port: daemon.port)
        try client.send(.hello(versions: [ProtocolVersion.current], clientName: "auth-test", credentials: Array(token.utf8)))
        return client
    }

    /// Connects with `token` and expects WELCOME.
    static func authenticated(_ daemon: DaemonProcess, token: String) throws -> RawClient {
        let client = try hello(daemon, token: token)
        let welcome = try client.receive()
        guard case .welcome = welcome else { throw RawClientError.unexpected("expected WELCOME", welcome) }
        return client
    }

    /// AUTH with `token`; the frames up to and including its answer.
    func reauthenticate(_ token: String) throws -> (answer: Message, skipped: [Message]) {
        try request { .auth(requestID: $0, credentials: Array(token.utf8)) }
    }
}

extension Message {
    /// The version of a DIFF, nil for anything else.
    var diffVersion: UInt64? {
        if case .diff(_, _, let version, _, _) = self { return version }
        return nil
    }
}
