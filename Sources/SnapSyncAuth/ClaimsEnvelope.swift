import JWTKit

/// The payload type handed to jwt-kit. Decoding never fails once the payload is JSON: the
/// claims, or what is wrong with them, are kept, so that one parse of the token serves the
/// header, the signature and the claims, and a malformed claim is reported only after the
/// signature has verified (an unsigned complaint about claims would tell nothing).
struct ClaimsEnvelope: JWTPayload {
    let claims: Result<TokenClaims, MalformedClaims>

    init(_ claims: TokenClaims) { self.claims = .success(claims) }

    init(from decoder: any Decoder) {
        do {
            claims = .success(try TokenClaims(from: decoder))
        } catch {
            claims = .failure(MalformedClaims(decoding: error))
        }
    }

    func encode(to encoder: any Encoder) throws {
        try claims.get().encode(to: encoder)
    }

    /// jwt-kit's own claim hook (used by `JWTKeyCollection.verify`, not by `TokenVerifier`,
    /// which checks times and audience against its clock and configuration): the claims must
    /// at least be well formed.
    func verify(using _: some JWTAlgorithm) throws {
        _ = try claims.get()
    }
}
