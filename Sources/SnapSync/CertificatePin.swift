import Crypto

/// A pinned public key: the SHA-256 of a certificate's SubjectPublicKeyInfo (RFC 7469's
/// `pin-sha256`), checked against the server's leaf certificate after the chain verified.
/// Platform-neutral: each transport hands over the leaf's DER, so Linux tests cover the check
/// that Apple platforms run too.
struct CertificatePin: Hashable, Sendable {
    /// The 32 bytes of the hash.
    let digest: [UInt8]
    /// As configured, for messages.
    let base64: String

    /// Reads `TLSConfiguration.pinnedPublicKeySHA256`.
    init(base64: String, host: String) throws(SnapSyncError) {
        guard let digest = Base64.decode(base64), digest.count == SHA256.byteCount else {
            throw .tlsConfigurationInvalid(
                host: host, reason: "the pinned key hash \"\(base64)\" is not the base64 of a 32-byte SHA-256")
        }
        self.digest = digest
        self.base64 = base64
    }

    /// `nil` when the certificate `leafDER` carries the pinned key, else why not.
    func check(leafDER: [UInt8], host: String) -> SnapSyncError? {
        guard let spki = Self.subjectPublicKeyInfo(ofCertificate: leafDER) else {
            return .tlsPinMismatch(host: host, expected: base64, presented: "an unreadable certificate")
        }
        let presented = Array(SHA256.hash(data: spki))
        guard presented != digest else { return nil }
        return .tlsPinMismatch(host: host, expected: base64, presented: Base64.encode(presented))
    }

    /// The DER of the certificate's `subjectPublicKeyInfo` (RFC 5280 §4.1: the seventh field
    /// of `tbsCertificate`, counting the optional `[0] version`), tag and length included;
    /// `nil` for bytes that are not a certificate. O(size of the certificate's header).
    static func subjectPublicKeyInfo(ofCertificate der: [UInt8]) -> [UInt8]? {
        var reader = DERReader(der[...])
        guard var certificate = reader.read(tag: 0x30)?.contents, var tbs = certificate.read(tag: 0x30)?.contents else { return nil }
        if tbs.peekTag == 0xA0 { guard tbs.read(tag: 0xA0) != nil else { return nil } }
        // serialNumber, signature, issuer, validity, subject.
        for tag: UInt8 in [0x02, 0x30, 0x30, 0x30, 0x30] {
            guard tbs.read(tag: tag) != nil else { return nil }
        }
        return tbs.read(tag: 0x30).map { Array($0.element) }
    }
}

/// Reads DER's tag-length-value elements in order (single-byte tags, definite lengths: all
/// that a certificate's header uses).
struct DERReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var peekTag: UInt8? { bytes.first }

    /// The next element if its tag is `tag`: the whole element and its contents, as readers of
    /// the same bytes. `nil` (and nothing consumed) for another tag or a truncated element.
    mutating func read(tag: UInt8) -> (element: ArraySlice<UInt8>, contents: DERReader)? {
        guard bytes.first == tag, bytes.count >= 2 else { return nil }
        let start = bytes.startIndex
        var index = start + 1
        var length = Int(bytes[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count), bytes.endIndex - index >= count else { return nil }
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard bytes.endIndex - index >= length else { return nil }
        let end = index + length
        defer { bytes = bytes[end...] }
        return (bytes[start..<end], DERReader(bytes[index..<end]))
    }
}
