import ArgumentParser
import Foundation
import SnapSyncAuth
import SnapSyncHub
import SnapSyncServer

/// `snapsyncd token`: mints a token with a key of a key file (docs/auth.md), for scripts,
/// tests and operators. Prints the token and a newline on stdout.
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a signed token (JWT) for a client.",
        discussion: """
            Signs the claims of docs/auth.md with the key KID of the key file, which must hold \
            the key's private part (d) for ES256 and EdDSA. Example: snapsyncd token --keys \
            keys.json --kid k1 --sub alice --room 'board:*=read,write' --ttl 1h
            """
    )

    @Option(help: ArgumentHelp("Key file (JWKS) holding the signing key.", valueName: "file"))
    var keys: String

    @Option(help: ArgumentHelp("Key id of the signing key.", valueName: "kid"))
    var kid: String

    @Option(help: ArgumentHelp("Subject: who the token is for (sub).", valueName: "sub"))
    var sub: String

    @Option(
        help: ArgumentHelp(
            "A grant MATCH=RIGHT[,RIGHT...]: MATCH a room name, or a prefix ending in * (* alone: every room); rights read, write, admin. Repeatable; none gives a token that can open no room.",
            valueName: "grant"))
    var room: [String] = []

    @Option(help: "Lifetime: exp is now plus this; durations take ms, s, m, h. (default: 1h)", transform: ConfigurationValue.duration)
    var ttl: Duration = .seconds(3600)

    @Option(help: ArgumentHelp("Audience (aud) the token is for; the daemon must be configured with the same one.", valueName: "aud"))
    var aud: String?

    func validate() throws {
        guard !sub.isEmpty else { throw ValidationError("--sub must not be empty") }
        guard ttl >= .seconds(1) else { throw ValidationError("--ttl must be at least 1s") }
        for spec in room {
            do {
                _ = try RoomGrant(spec: spec)
            } catch {
                throw ValidationError("--room: \(error)")
            }
        }
    }

    func run() throws {
        let grants = try room.map { spec throws(GrantError) in try RoomGrant(spec: spec) }
        // Whole seconds, so that iat and exp are JSON integers.
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let claims = TokenClaims(
            subject: sub, expiresAt: now.addingTimeInterval(Double(ttl.components.seconds)), issuedAt: now,
            audience: aud.map { [$0] } ?? [], grants: grants)
        let (path, kid) = (keys, self.kid)
        do {
            let token = try waitForTask {
                let keys = try await AuthKeySet.load(contentsOf: path)
                return try await keys.mint(claims, keyID: kid)
            }
            print(token)
        } catch {
            FileHandle.standardError.write(Data("snapsyncd token: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}
