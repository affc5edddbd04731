import SwiftASN1
import X509

extension Certificate {
    /// Every `CERTIFICATE` block of `pem` (RFC 7468, read by SwiftASN1's `PEMDocument`), in
    /// order; other blocks (a private key) are skipped. `what` names the text in the error,
    /// e.g. "the trust roots". Used for the `TLSConfiguration`'s certificates on every platform,
    /// so that a bad PEM is the same typed error everywhere.
    static func all(inPEM pem: String, what: String, host: String) throws(SnapSyncError) -> [Certificate] {
        let certificates: [Certificate]
        do {
            certificates = try PEMDocument.parseMultiple(pemString: pem)
                .filter { $0.discriminator == "CERTIFICATE" }
                .map { try Certificate(derEncoded: $0.derBytes) }
        } catch {
            throw .tlsConfigurationInvalid(host: host, reason: "\(what): \(error)")
        }
        guard !certificates.isEmpty else { throw .tlsConfigurationInvalid(host: host, reason: "\(what): no CERTIFICATE block") }
        return certificates
    }
}
