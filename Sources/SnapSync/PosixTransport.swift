#if !canImport(Network)
    import NIOCore
    import NIOPosix
    import NIOSSL
    import SwiftASN1
    import X509

    /// The transport off Apple platforms: NIOPosix's sockets, TLS by NIOSSL (BoringSSL).
    /// See ClientTransport.swift.
    enum PosixTransport {
        /// NIO's shared event loops: a client needs no threads of its own, and the group lives
        /// as long as the process.
        static var group: MultiThreadedEventLoopGroup { .singleton }

        static func connect(_ target: TransportTarget, connection: ClientChannel) -> EventLoopFuture<any Channel> {
            let tls = target.tls
            return ClientBootstrap(group: group)
                .connectTimeout(TimeAmount(target.connectTimeout))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        if let tls {
                            try pipeline.addHandler(
                                NIOSSLClientHandler(context: tls.context, serverHostname: tls.sniName) { presented, promise in
                                    verify(presented, with: tls.verifier, connection: connection, promise: promise)
                                })
                        }
                        try connection.installHandlers(on: pipeline, waitsForTLSHandshake: tls != nil)
                    }
                }
                .connect(host: target.host, port: target.port)
        }

        /// NIOSSL's custom verification: BoringSSL verifies nothing itself; the shared verifier
        /// decides, in the handshake, and its refusal is recorded on the connection so that it
        /// is reported as itself rather than as BoringSSL's CERTIFICATE_VERIFY_FAILED.
        private static func verify(
            _ presented: [NIOSSLCertificate], with verifier: ServerCertificateVerifier, connection: ClientChannel,
            promise: EventLoopPromise<NIOSSLVerificationResult>
        ) {
            let der: [[UInt8]]
            do {
                der = try presented.map { try $0.toDERBytes() }
            } catch {
                connection.fail(.tlsUntrustedCertificate(host: verifier.name, reason: "the server's certificate cannot be read: \(error)"))
                return promise.succeed(.failed)
            }
            promise.completeWithTask {
                guard let refusal = await verifier.verify(presented: der) else { return .certificateVerified }
                connection.fail(refusal)
                return .failed
            }
        }

        // MARK: TLS

        struct PreparedTLS: Sendable {
            /// Presents the client certificate; leaves verification to `verifier`.
            let context: NIOSSLContext
            /// Sent in SNI; nil for an IP address, which SNI cannot carry.
            let sniName: String?
            let verifier: ServerCertificateVerifier
            var verifiedName: String { verifier.name }
        }

        static func prepare(_ tls: SnapSyncClient.TLSConfiguration, host: String) throws(SnapSyncError) -> PreparedTLS {
            let name = tls.serverName ?? host
            let pin = try tls.pinnedPublicKeySHA256.map { (base64) throws(SnapSyncError) in try CertificatePin(base64: base64, host: name) }
            let roots: CertificateStore
            switch tls.trustRoots {
            case .system:
                // The distribution's CA bundle, read by swift-certificates.
                roots = .systemTrustRoots
            case .certificates(let pem):
                roots = CertificateStore(try Certificate.all(inPEM: pem, what: "the trust roots", host: name))
            }
            var configuration = NIOSSL.TLSConfiguration.makeClientConfiguration()
            configuration.minimumTLSVersion = .tlsv12
            // The custom verification callback replaces BoringSSL's chain verification (it runs
            // unless verification is .none); the verifier checks the name too, so NIOSSL's own
            // check after the handshake is off.
            configuration.certificateVerification = .noHostnameVerification
            if let client = tls.clientCertificate {
                let chain = try Certificate.all(inPEM: client.certificateChainPEM, what: "the client certificate chain", host: name)
                do {
                    configuration.certificateChain = try chain.map { certificate in
                        var serializer = DER.Serializer()
                        try serializer.serialize(certificate)
                        return .certificate(try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der))
                    }
                    configuration.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(client.privateKeyPEM.utf8), format: .pem))
                } catch {
                    throw .tlsConfigurationInvalid(host: name, reason: "the client certificate: \(error)")
                }
            }
            let context: NIOSSLContext
            do {
                context = try NIOSSLContext(configuration: configuration)
            } catch {
                throw .tlsConfigurationInvalid(host: name, reason: "\(error)")
            }
            return PreparedTLS(
                context: context, sniName: ServerIdentityPolicy.isIPAddress(name) ? nil : name,
                verifier: ServerCertificateVerifier(roots: roots, name: name, pin: pin))
        }

        /// The one place that maps NIOSSL's errors to `SnapSyncError`; nil for an error that is
        /// not about TLS. A certificate the verifier refused was recorded on the connection and
        /// wins over these.
        static func describe(_ error: any Error, target: TransportTarget) -> SnapSyncError? {
            let host = target.verifiedName
            switch error {
            case NIOSSLError.uncleanShutdown:
                // A peer that closes without close_notify: the frames, not TLS, say whether a
                // message was whole, as on the plain port.
                return .connectionLost("the server closed the connection (without TLS close_notify)")
            case NIOSSLError.handshakeFailed(let error):
                return .tlsHandshakeFailed(host: host, reason: reasons(error))
            case let error as BoringSSLError:
                return .tlsHandshakeFailed(host: host, reason: reasons(error))
            case let error as NIOSSLError:
                return .tlsHandshakeFailed(host: host, reason: "\(error)")
            case let error as NIOSSLExtraError:
                return .tlsHandshakeFailed(host: host, reason: "\(error)")
            default:
                return nil
            }
        }

        /// BoringSSL's reason codes of `error`, e.g. `TLSV1_ALERT_CERTIFICATE_REQUIRED`, without
        /// the numbers and source locations of NIOSSL's description
        /// ("Error: N error:1000045c:SSL routines:OPENSSL_internal:REASON at FILE:LINE").
        static func reasons(_ error: BoringSSLError) -> String {
            let stack: NIOBoringSSLErrorStack
            switch error {
            case .sslError(let errors), .unknownError(let errors), .invalidSNIName(let errors), .failedToSetALPN(let errors):
                stack = errors
            default:
                return "\(error)"
            }
            let reasons = stack.map { entry -> String in
                let text = "\(entry)"
                let message = text.firstRange(of: " at ").map { text[..<$0.lowerBound] } ?? text[...]
                return String(message.split(separator: ":").last ?? message)
            }
            return reasons.isEmpty ? "\(error)" : reasons.joined(separator: ", ")
        }
    }
#endif
