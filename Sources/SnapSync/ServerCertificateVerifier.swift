import Foundation
import NIOCore
import SwiftASN1
import X509

/// Verifies the certificates a server presents in the TLS handshake, by swift-certificates'
/// `Verifier`: a chain to one of `roots` (RFC 5280, validity at the time of the handshake), the
/// leaf issued for the verified name (RFC 6125: DNS name, or IP address entry for an address),
/// then the pinned key. Platform-neutral: each transport hands over the DER it was presented,
/// from inside its handshake (PosixTransport: NIOSSL's custom verification callback;
/// NetworkTransport: the verify block), so a refusal is one handshake and one typed error.
struct ServerCertificateVerifier: Sendable {
    let roots: CertificateStore
    /// The configured `serverName`, else the host.
    let name: String
    let pin: CertificatePin?

    init(roots: CertificateStore, name: String, pin: CertificatePin?) {
        self.roots = roots
        self.name = name
        self.pin = pin
    }

    /// nil when `presented` (DER, the server's certificate first, then any intermediates) is
    /// trusted for `name` and carries the pinned key; else why not. Path building is
    /// swift-certificates' (its cost grows with the number of intermediates, a handful).
    func verify(presented: [[UInt8]]) async -> SnapSyncError? {
        let certificates: [Certificate]
        do {
            certificates = try presented.map { try Certificate(derEncoded: $0) }
        } catch {
            return .tlsUntrustedCertificate(host: name, reason: "the server's certificate is not X.509: \(error)")
        }
        guard let leaf = certificates.first else {
            return .tlsUntrustedCertificate(host: name, reason: "the server presented no certificate")
        }
        var verifier = Verifier(rootCertificates: roots) {
            RFC5280Policy()
            identity
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(certificates.dropFirst())) {
        case .validCertificate:
            return pin?.check(leaf: leaf, host: name)
        case .couldNotValidate(let failures):
            return describe(failures)
        }
    }

    private var identity: ServerIdentityPolicy {
        let isAddress = ServerIdentityPolicy.isIPAddress(name)
        return ServerIdentityPolicy(serverHostname: isAddress ? nil : name, serverIP: isAddress ? name : nil)
    }

    /// The one place that maps the verifier's refusals to `SnapSyncError`. Without a failure the
    /// verifier found no path to a root. A path it found and refused was refused by the first
    /// policy that failed, whose reason it gives; the certificate dates and the name are looked
    /// up on that path to type the error (dates first: an expired certificate is expired
    /// whatever else is wrong with it).
    private func describe(_ failures: [CertificateValidationResult.PolicyFailure]) -> SnapSyncError {
        guard let failure = failures.first else {
            return .tlsUntrustedCertificate(host: name, reason: "the chain does not lead to a trust root")
        }
        let now = Date()
        if let certificate = failure.chain.first(where: { now > $0.notValidAfter }) {
            return .tlsCertificateExpired(host: name, reason: "\(certificate.subject) expired at \(certificate.notValidAfter)")
        }
        if let certificate = failure.chain.first(where: { now < $0.notValidBefore }) {
            return .tlsCertificateExpired(host: name, reason: "\(certificate.subject) is valid only from \(certificate.notValidBefore)")
        }
        var identity = identity
        if case .failsToMeetPolicy(let mismatch) = identity.chainMeetsPolicyRequirements(chain: failure.chain) {
            return .tlsHostnameMismatch(host: name, reason: "\(mismatch)")
        }
        return .tlsUntrustedCertificate(host: name, reason: "\(failure.policyFailureReason)")
    }
}

extension ServerIdentityPolicy {
    /// `name` is an IPv4 or IPv6 address (matched against the certificate's IP entries, and not
    /// sent in SNI), not a DNS name.
    static func isIPAddress(_ name: String) -> Bool {
        (try? SocketAddress(ipAddress: name, port: 0)) != nil
    }
}
