package import SnapSyncAuth

/// The TLS listener's flags (`--tls-listen`, `--tls-cert`, `--tls-key`, `--tls-client-ca`,
/// `--tls-min-version`, `--tls-ciphers`): where it listens and what `TLSContext` is built from.
/// Plain values; the files are read when the daemon starts and again on SIGHUP.
package struct TLSSettings: Sendable, Equatable {
    /// The lowest protocol version accepted.
    package enum MinimumVersion: String, Sendable, CaseIterable {
        case tls12 = "1.2"
        case tls13 = "1.3"
    }

    package var host: String
    package var port: Int
    /// PEM certificate chain: the server's certificate first, then any intermediates.
    package var certificatePath: String
    /// PEM private key of the certificate.
    package var keyPath: String
    /// PEM CA certificates for mutual TLS: when set, every client must present a certificate
    /// that chains to one of them.
    package var clientCAPath: String?
    /// `--tls-client-grant`: what a session authenticated by its client certificate alone (a
    /// HELLO without a token, on a daemon that authenticates) may do; nil: a certificate alone
    /// authenticates no one, and such a HELLO is refused as a missing token.
    package var clientCertificateGrants: [RoomGrant]?
    package var minimumVersion: MinimumVersion = .tls12
    /// OpenSSL cipher list for TLS 1.2 (`SSL_CTX_set_cipher_list`); nil keeps OpenSSL's default.
    /// TLS 1.3 suites always keep OpenSSL's default.
    package var ciphers: String?

    package init(host: String, port: Int, certificatePath: String, keyPath: String) {
        self.host = host
        self.port = port
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }
}
