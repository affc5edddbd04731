extension SnapSyncClient {
    /// TLS to the daemon's `--tls-listen` port (docs/tls.md). Set `Configuration.tls` to use it;
    /// `nil` there is clear text to the plain port.
    ///
    /// ```swift
    /// var tls = SnapSyncClient.TLSConfiguration()          // the system's trust roots
    /// tls.trustRoots = .certificates(pem: caPEM)           // or a private CA
    /// tls.pinnedPublicKeySHA256 = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    /// let client = SnapSyncClient(configuration: .init(host: "sync.example.com", port: 7443, tls: tls))
    /// ```
    ///
    /// Every connection verifies the server's certificate chain against `trustRoots` and its name
    /// against `serverName`; TLS 1.2 is the oldest version offered. A certificate that fails
    /// fails the connection attempt with a typed error (`SnapSyncError.tlsHostnameMismatch`,
    /// `.tlsCertificateExpired`, `.tlsUntrustedCertificate`, `.tlsPinMismatch`,
    /// `.tlsHandshakeFailed`), before HELLO and its token are sent.
    public struct TLSConfiguration: Hashable, Sendable {
        /// The certificate authorities the server's chain must lead to.
        public var trustRoots: TrustRoots
        /// The base64 SHA-256 of the server certificate's SubjectPublicKeyInfo (the form of
        /// HPKP and `openssl x509 -pubkey | openssl pkey -pubin -outform der | openssl dgst
        /// -sha256 -binary | base64`), or `nil` for no pinning. Checked in addition to the
        /// chain, against the server's own (leaf) certificate.
        public var pinnedPublicKeySHA256: String?
        /// A certificate and key to present when the daemon asks for one (`--tls-client-ca`).
        public var clientCertificate: ClientCertificate?
        /// The name sent in SNI and looked for in the server's certificate; `nil`: the
        /// configuration's `host` (an IP address is then matched against the certificate's IP
        /// entries and not sent in SNI).
        public var serverName: String?

        public init(
            trustRoots: TrustRoots = .system, pinnedPublicKeySHA256: String? = nil,
            clientCertificate: ClientCertificate? = nil, serverName: String? = nil
        ) {
            self.trustRoots = trustRoots
            self.pinnedPublicKeySHA256 = pinnedPublicKeySHA256
            self.clientCertificate = clientCertificate
            self.serverName = serverName
        }
    }

    /// Where the certificate authorities that a server's chain must lead to come from.
    public enum TrustRoots: Hashable, Sendable {
        /// The system's trust store (Linux: the distribution's CA bundle; Apple platforms: the
        /// keychain's roots).
        case system
        /// Only these certificates (one or more PEM `CERTIFICATE` blocks), e.g. a private CA.
        case certificates(pem: String)
    }

    /// The client's certificate for mutual TLS: a PEM chain (the client's certificate first) and
    /// its PEM private key (PKCS#8 or the key type's own PEM form).
    ///
    /// On Apple platforms Network.framework takes a client identity from the keychain only; a
    /// PEM key cannot be handed to it, and a connection with a `clientCertificate` fails with
    /// `SnapSyncError.tlsConfigurationInvalid` there.
    public struct ClientCertificate: Hashable, Sendable {
        public var certificateChainPEM: String
        public var privateKeyPEM: String

        public init(certificateChainPEM: String, privateKeyPEM: String) {
            self.certificateChainPEM = certificateChainPEM
            self.privateKeyPEM = privateKeyPEM
        }
    }
}
