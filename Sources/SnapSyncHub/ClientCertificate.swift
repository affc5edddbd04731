// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The client certificate a TLS connection's handshake verified (mutual TLS, `--tls-client-ca`),
/// as the hub sees it: no OpenSSL, two plain values. With `--tls-client-grant` a HELLO without a
/// token is authenticated by it (`Hub.authenticate`, docs/auth.md "Client certificates").
package struct ClientCertificate: Equatable {
    /// The subject in RFC 2253 form as OpenSSL prints it (`XN_FLAG_RFC2253`, UTF-8 kept), e.g.
    /// `CN=alice,O=Example`: it stands for the session's `sub`.
    let subject: String
    /// The certificate's `notAfter`: the session's expiry, as a token's `exp`.
    let expiresAt: Date

    package init(subject: String, notAfterSeconds: Int) {
        self.subject = subject
        self.expiresAt = Date(timeIntervalSince1970: Double(notAfterSeconds))
    }
}
