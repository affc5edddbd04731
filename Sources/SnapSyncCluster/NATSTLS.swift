/// How cluster mode reaches its NATS servers over TLS (`--cluster tls://...`, docs/cluster.md,
/// "TLS to NATS"): the URLs' scheme says whether TLS is required, these files what it trusts
/// and what it shows. Applied, for every connection the same, by `NATSConnection`.
public struct NATSTLS: Sendable, Equatable {
    /// PEM trust roots for the servers' certificates, added to the system's (`--cluster-ca`).
    public var trustedCertificatesFile: String?
    /// PEM certificate chain (the client's certificate first) for servers that verify clients
    /// (`--cluster-cert`); only with `privateKeyFile`.
    public var certificateChainFile: String?
    /// PEM private key of `certificateChainFile` (`--cluster-key`).
    public var privateKeyFile: String?

    public init(trustedCertificatesFile: String? = nil, certificateChainFile: String? = nil, privateKeyFile: String? = nil) {
        self.trustedCertificatesFile = trustedCertificatesFile
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
    }

    /// No file: the system's trust roots, no client certificate.
    public var isEmpty: Bool { self == NATSTLS() }

    /// Whether `servers` require TLS: every URL `tls://` (true) or none (false). A mixed list is
    /// refused: libnats applies one TLS setting to the whole connection, so it would either reach
    /// the `nats://` servers with TLS anyway or the `tls://` ones without it.
    public static func required(by servers: [String]) -> Bool? {
        let secure = servers.filter { $0.hasPrefix("tls://") }.count
        if secure == 0 { return false }
        return secure == servers.count ? true : nil
    }
}
