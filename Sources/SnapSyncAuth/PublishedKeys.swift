/// Keys whose private half is printed in a public document: anyone can sign tokens with them,
/// so a key file holding one is refused, however it got there (copied from our docs to try
/// things out, then deployed).
///
/// - the HS256 secrets of Protocol/AUTH.md's example and docs/auth.md's example file;
/// - the ES256 key of RFC 7515 appendix A.3 (its `d` is in the RFC; docs/auth.md shows its x, y);
/// - the Ed25519 key of RFC 8037 appendix A (likewise).
enum PublishedKeys {
    /// HS256 secrets, base64url as printed.
    static let secrets: Set<[UInt8]> = decodedSet([
        "ZXhhbXBsZSBzZWNyZXQ6IG5ldmVyIHVzZSBpdCEhISE",
        "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM",
    ])
    /// ES256 and Ed25519 public keys (`x`), base64url as printed.
    static let publicKeys: Set<[UInt8]> = decodedSet([
        "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
        "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
    ])

    static let refusal =
        "it is a published example key (Protocol/AUTH.md, docs/auth.md, RFC 7515 A.3 or RFC 8037 A), so anyone can sign tokens with it: make your own with `snapsyncd keygen`"

    private static func decodedSet(_ texts: [String]) -> Set<[UInt8]> {
        Set(
            texts.map { text in
                guard let bytes = Base64URL.decode(text) else { preconditionFailure("bad published key \(text)") }
                return bytes
            })
    }
}
