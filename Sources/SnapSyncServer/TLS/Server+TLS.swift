import Logging
internal import Glibc
import SnapSyncHub
import SnapSyncAuth

// The TLS listener's context: logged at start, replaced on SIGHUP; a certificate expired or
// near its end is a warning each time.

extension Server {
    func logTLSListening(_ address: SocketAddress, _ context: TLSContext, metadata: Logger.Metadata) {
        let settings = context.settings
        var all = metadata
        all["certificate"] = "\(context.certificateDescription)"
        all["not_after"] = "\(context.certificateNotAfter.map { CertificateExpiry(notAfter: $0).timestamp } ?? "?")"
        all["min_version"] = "\(settings.minimumVersion.rawValue)"
        all["client_ca"] = "\(settings.clientCAPath ?? "none")"
        if let grants = settings.clientCertificateGrants {
            all["client_grants"] = "\(grants.map { "\($0.match)=\($0.rights.map(\.rawValue).sorted().joined(separator: ","))" }.joined(separator: " "))"
        }
        all["openssl"] = "\(TLSContext.libraryVersion)"
        all["ktls_requested"] = "\(context.requestsKernelTLS)"
        logger.info("TLS listening on \(address)", metadata: all)
        warnOfExpiry(context)
    }

    /// Warns when the certificate `context` serves has expired or expires within
    /// `CertificateExpiry.warningWindow`.
    private func warnOfExpiry(_ context: TLSContext) {
        guard let notAfter = context.certificateNotAfter else { return }
        let expiry = CertificateExpiry(notAfter: notAfter)
        if let warning = expiry.warning(now: Int(time(nil))) {
            logger.warning("\(warning)", metadata: ["cert": "\(context.settings.certificatePath)", "not_after": "\(expiry.timestamp)"])
        }
    }

    /// SIGHUP: builds a new context from the same files (re-read). New connections get it;
    /// connections already open keep theirs (each `SSL` holds its context). A file that cannot
    /// be loaded, or a key that does not match, keeps the context in use.
    /// Runs on the loop: reading two small PEM files is short.
    func reloadTLS() {
        guard let settings = configuration.tls else { return }
        logger.info("received SIGHUP: reloading the TLS certificate and key", metadata: ["cert": "\(settings.certificatePath)", "key": "\(settings.keyPath)"])
        do {
            let context = try TLSContext(settings: settings)
            tlsContext = context
            logger.notice(
                "TLS certificate reloaded",
                metadata: [
                    "certificate": "\(context.certificateDescription)",
                    "not_after": "\(context.certificateNotAfter.map { CertificateExpiry(notAfter: $0).timestamp } ?? "?")",
                ])
            warnOfExpiry(context)
        } catch {
            logger.error("TLS reload refused, the certificate in use is kept", metadata: ["error": "\(error)"])
        }
    }
}
