import Crypto
import Foundation
import SwiftASN1
import X509

/// A pinned public key: the SHA-256 of a certificate's SubjectPublicKeyInfo (RFC 7469's
/// `pin-sha256`), checked against the server's leaf certificate after the chain verified
/// (ServerCertificateVerifier).
struct CertificatePin: Hashable, Sendable {
    /// The 32 bytes of the hash.
    let digest: [UInt8]
    /// As configured, for messages.
    let base64: String

    /// Reads `TLSConfiguration.pinnedPublicKeySHA256`.
    init(base64: String, host: String) throws(SnapSyncError) {
        guard let digest = Data(base64Encoded: base64), digest.count == SHA256.byteCount else {
            throw .tlsConfigurationInvalid(
                host: host, reason: "the pinned key hash \"\(base64)\" is not the base64 of a 32-byte SHA-256")
        }
        self.digest = Array(digest)
        self.base64 = base64
    }

    /// `nil` when `leaf` carries the pinned key, else why not.
    func check(leaf: Certificate, host: String) -> SnapSyncError? {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(leaf.publicKey)
        } catch {
            return .tlsPinMismatch(host: host, expected: base64, presented: "a key that cannot be encoded (\(error))")
        }
        let presented = Array(SHA256.hash(data: serializer.serializedBytes))
        guard presented != digest else { return nil }
        return .tlsPinMismatch(host: host, expected: base64, presented: Data(presented).base64EncodedString())
    }
}
