import ArgumentParser
import Foundation
import SnapSyncAuth

/// `snapsyncd keygen`: a fresh signing key as a key file entry (docs/auth.md, "Keys").
struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Generate a signing key and write it to a key file (JWKS).",
        discussion: """
            The key is written with its private part: keep that file private (mode 0600). The \
            daemon only verifies: for ES256 and EdDSA give it the file written by --public-out \
            (no d); an HS256 key is one secret that both signs and verifies.
            """
    )

    @Option(help: ArgumentHelp("Algorithm of the key: ES256, EdDSA or HS256.", valueName: "alg"))
    var alg: String

    @Option(help: ArgumentHelp("Key id (kid) tokens will name; new in the file.", valueName: "kid"))
    var kid: String

    @Option(help: ArgumentHelp("Key file to create, or to add the key to; without it the key file is printed.", valueName: "file"))
    var out: String?

    @Option(help: ArgumentHelp("Also add the key without its private part to this key file, for the daemon.", valueName: "file"))
    var publicOut: String?

    func validate() throws {
        guard SigningAlgorithm(rawValue: alg) != nil else { throw ValidationError("--alg must be one of ES256, EdDSA, HS256") }
        guard !kid.isEmpty else { throw ValidationError("--kid must not be empty") }
        guard publicOut == nil || publicOut != out else { throw ValidationError("--public-out must differ from --out") }
    }

    func run() throws {
        let key = KeyGenerator.generate(SigningAlgorithm(rawValue: alg) ?? .es256, keyID: kid)
        do {
            var entries: [(key: JSONWebKey, path: String)] = []
            if let out { entries.append((key, out)) }
            if let publicOut { entries.append((key.verificationOnly, publicOut)) }
            try waitForTask { [entries] in try await KeyFileWriter.append(entries) }
            if out == nil { FileHandle.standardOutput.write(try KeyFileWriter.render([key])) }
        } catch {
            FileHandle.standardError.write(Data("snapsyncd keygen: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}
