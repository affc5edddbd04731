/// The blocks of a PEM text (RFC 7468): `-----BEGIN LABEL-----`, base64, `-----END LABEL-----`.
/// Used for the `TLSConfiguration`'s certificates on every platform, so that a bad PEM is the
/// same typed error everywhere and the transports are handed DER.
enum PEM {
    struct Block: Hashable {
        var label: String
        var der: [UInt8]
    }

    /// Every block of `text`, in order; text outside blocks (comments, `openssl x509 -text`
    /// output) is ignored. Throws the reason when a block is unterminated or not base64.
    static func blocks(in text: String) throws(PEMError) -> [Block] {
        var blocks: [Block] = []
        var open: (label: String, body: String)?
        for line in text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline) {
            let line = line.trimmingASCIIWhitespace()
            if let label = line.between("-----BEGIN ", and: "-----") {
                guard open == nil else { throw PEMError("BEGIN \(label) inside an open \(open!.label) block") }
                open = (String(label), "")
            } else if let label = line.between("-----END ", and: "-----") {
                guard let block = open, block.label == label else { throw PEMError("END \(label) without its BEGIN") }
                guard let der = Base64.decode(block.body), !der.isEmpty else { throw PEMError("the \(label) block is not base64") }
                blocks.append(Block(label: String(label), der: der))
                open = nil
            } else if open != nil {
                open!.body += line
            }
        }
        if let open { throw PEMError("the \(open.label) block has no END line") }
        return blocks
    }

    /// The DER of every `CERTIFICATE` block; throws when there is none.
    static func certificates(in text: String) throws(PEMError) -> [[UInt8]] {
        let certificates = try blocks(in: text).filter { $0.label == "CERTIFICATE" }.map(\.der)
        guard !certificates.isEmpty else { throw PEMError("no CERTIFICATE block") }
        return certificates
    }
}

/// Why a PEM text was refused.
struct PEMError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension Substring {
    fileprivate func trimmingASCIIWhitespace() -> Substring {
        var trimmed = self
        while let first = trimmed.first, first == " " || first == "\t" { trimmed = trimmed.dropFirst() }
        while let last = trimmed.last, last == " " || last == "\t" || last == "\r" { trimmed = trimmed.dropLast() }
        return trimmed
    }

    fileprivate func between(_ prefix: String, and suffix: String) -> Substring? {
        guard hasPrefix(prefix), hasSuffix(suffix), count >= prefix.count + suffix.count else { return nil }
        return dropFirst(prefix.count).dropLast(suffix.count)
    }
}
