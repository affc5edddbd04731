#if canImport(Network)
    import Dispatch
    import Foundation
    import Network
    import NIOCore
    import NIOTransportServices
    import Security
    import SwiftASN1
    import X509

    /// The transport on Apple platforms: Network.framework through NIOTransportServices, TLS by
    /// the system's Security framework. See ClientTransport.swift for why.
    enum NetworkTransport {
        /// NIOTransportServices' shared event loops (dispatch queues).
        static var group: NIOTSEventLoopGroup { .singleton }

        static func connect(_ target: TransportTarget, connection: ClientChannel) -> EventLoopFuture<any Channel> {
            // Network.framework would otherwise park a connection it cannot make (no route, a
            // refused certificate) in "waiting" until connectTimeout: fail it at once and let the
            // client's ReconnectPolicy do the waiting, as on Linux.
            var bootstrap = NIOTSConnectionBootstrap(group: group)
                .connectTimeout(TimeAmount(target.connectTimeout))
                .channelOption(NIOTSChannelOptions.waitForActivity, value: false)
            if let tls = target.tls {
                bootstrap = bootstrap.tlsOptions(tlsOptions(tls, connection: connection))
            }
            let waitsForTLSHandshake = target.tls != nil
            return
                bootstrap
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try connection.installHandlers(on: channel.pipeline.syncOperations, waitsForTLSHandshake: waitsForTLSHandshake)
                    }
                }
                .connect(host: target.host, port: target.port)
        }

        // MARK: TLS

        struct PreparedTLS: Sendable {
            let verifiedName: String
            /// The configured trust roots' verifier, shared with Linux; nil: the system's roots.
            /// swift-certificates cannot read those here (its `systemTrustRoots` is a Linux CA
            /// bundle), so Security evaluates the chain and the name, and only the pin is shared.
            let verifier: ServerCertificateVerifier?
            let pin: CertificatePin?
        }

        static func prepare(_ tls: SnapSyncClient.TLSConfiguration, host: String) throws(SnapSyncError) -> PreparedTLS {
            let name = tls.serverName ?? host
            let pin = try tls.pinnedPublicKeySHA256.map { (base64) throws(SnapSyncError) in try CertificatePin(base64: base64, host: name) }
            guard tls.clientCertificate == nil else {
                throw .tlsConfigurationInvalid(
                    host: name, reason: "Network.framework presents a client certificate only from a keychain identity, not from PEM")
            }
            var verifier: ServerCertificateVerifier?
            if case .certificates(let pem) = tls.trustRoots {
                let roots = CertificateStore(try Certificate.all(inPEM: pem, what: "the trust roots", host: name))
                verifier = ServerCertificateVerifier(roots: roots, name: name, pin: pin)
            }
            return PreparedTLS(verifiedName: name, verifier: verifier, pin: pin)
        }

        /// Where the verify blocks run: off the connection's queue, as Security may block.
        private static let verifyQueue = DispatchQueue(label: "SnapSync.TLS.verify")

        /// TLS 1.2 or later, SNI with the verified name, and a verify block that verifies the
        /// server's chain, name and pin in the handshake. A refusal is recorded on the
        /// connection, so that it is reported as itself rather than as Network.framework's
        /// generic "bad certificate".
        private static func tlsOptions(_ tls: PreparedTLS, connection: ClientChannel) -> NWProtocolTLS.Options {
            let options = NWProtocolTLS.Options()
            let security = options.securityProtocolOptions
            sec_protocol_options_set_min_tls_protocol_version(security, .TLSv12)
            // RFC 6066 forbids an IP literal as SNI; SecPolicyCreateSSL still checks IP entries.
            if !ServerIdentityPolicy.isIPAddress(tls.verifiedName) {
                sec_protocol_options_set_tls_server_name(security, tls.verifiedName)
            }
            sec_protocol_options_set_verify_block(
                security,
                { metadata, trust, complete in
                    // Called once, by Security, from the verify queue or the task below.
                    nonisolated(unsafe) let complete = complete
                    let answer: @Sendable (SnapSyncError?) -> Void = { refusal in
                        if let refusal { connection.fail(refusal) }
                        complete(refusal == nil)
                    }
                    if let verifier = tls.verifier {
                        let presented = peerCertificates(metadata)
                        Task { answer(await verifier.verify(presented: presented)) }
                    } else {
                        answer(evaluate(sec_trust_copy_ref(trust).takeRetainedValue(), tls))
                    }
                }, verifyQueue)
            return options
        }

        /// The DER of the certificates the server presented, its own first.
        private static func peerCertificates(_ metadata: sec_protocol_metadata_t) -> [[UInt8]] {
            var chain: [[UInt8]] = []
            _ = sec_protocol_metadata_access_peer_certificate_chain(metadata) { certificate in
                chain.append(Array(SecCertificateCopyData(sec_certificate_copy_ref(certificate).takeRetainedValue()) as Data))
            }
            return chain
        }

        /// The system's roots: Security's evaluation of the chain and the name, then the pin.
        private static func evaluate(_ trust: SecTrust, _ tls: PreparedTLS) -> SnapSyncError? {
            let host = tls.verifiedName
            SecTrustSetPolicies(trust, SecPolicyCreateSSL(true, host as CFString))
            var error: CFError?
            guard SecTrustEvaluateWithError(trust, &error) else {
                return describe(trustError: error, host: host)
            }
            guard let pin = tls.pin else { return nil }
            guard let chain = SecTrustCopyCertificateChain(trust) as? [SecCertificate], let leaf = chain.first,
                let certificate = try? Certificate(derEncoded: Array(SecCertificateCopyData(leaf) as Data))
            else {
                return .tlsPinMismatch(host: host, expected: pin.base64, presented: "no readable certificate")
            }
            return pin.check(leaf: certificate, host: host)
        }

        /// The one place that maps Security's trust results to `SnapSyncError`.
        private static func describe(trustError error: CFError?, host: String) -> SnapSyncError {
            let reason = error.map { "\($0)" } ?? "the trust evaluation failed"
            let status = error.map { OSStatus(truncatingIfNeeded: CFErrorGetCode($0)) } ?? errSecNotTrusted
            switch status {
            case errSecHostNameMismatch:
                return .tlsHostnameMismatch(host: host, reason: reason)
            case errSecCertificateExpired, errSecCertificateNotValidYet:
                return .tlsCertificateExpired(host: host, reason: reason)
            default:
                return .tlsUntrustedCertificate(host: host, reason: reason)
            }
        }

        /// The one place that maps Network.framework's TLS errors to `SnapSyncError`; the verify
        /// block's refusals were recorded on the connection and win over these.
        static func describe(_ error: any Error, target: TransportTarget) -> SnapSyncError? {
            guard target.tls != nil, let error = error as? NWError, case .tls(let status) = error else { return nil }
            return .tlsHandshakeFailed(host: target.verifiedName, reason: "\(error) (OSStatus \(status))")
        }
    }
#endif
