#if !canImport(Network)
    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif
    import NIOCore
    import NIOPosix
    import NIOSSL
    import NIOTLS

    /// The transport off Apple platforms: NIOPosix's sockets, TLS by NIOSSL (BoringSSL).
    /// See ClientTransport.swift.
    enum PosixTransport {
        /// NIO's shared event loops: a client needs no threads of its own, and the group lives
        /// as long as the process.
        static var group: MultiThreadedEventLoopGroup { .singleton }

        static func connect(_ target: TransportTarget, connection: Connection) -> EventLoopFuture<any Channel> {
            let tls = target.tls
            return ClientBootstrap(group: group)
                .connectTimeout(TimeAmount(target.connectTimeout))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        var verifyPeer: ((ChannelHandlerContext) -> SnapSyncError?)?
                        if let tls {
                            try pipeline.addHandler(NIOSSLClientHandler(context: tls.context, serverHostname: tls.sniName))
                            if let pin = tls.pin {
                                verifyPeer = { context in
                                    let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
                                    guard let der = try? handler?.peerCertificate?.toDERBytes() else {
                                        return .tlsPinMismatch(host: tls.verifiedName, expected: pin.base64, presented: "no certificate")
                                    }
                                    return pin.check(leafDER: der, host: tls.verifiedName)
                                }
                            }
                        }
                        try connection.installHandlers(on: pipeline, waitsForTLSHandshake: tls != nil, verifyPeer: verifyPeer)
                    }
                }
                .connect(host: target.host, port: target.port)
        }

        // MARK: TLS

        struct PreparedTLS: Sendable {
            /// Verifies the chain against the trust roots, presents the client certificate.
            let context: NIOSSLContext
            /// The same without any verification: only to read a refused server's certificate
            /// (`describe`), never for a connection that carries frames.
            let inspectionContext: NIOSSLContext
            /// Sent in SNI and checked by NIOSSL; nil for an IP address, which SNI cannot carry
            /// and NIOSSL then matches against the certificate's IP entries.
            let sniName: String?
            let verifiedName: String
            let pin: CertificatePin?
        }

        static func prepare(_ tls: SnapSyncClient.TLSConfiguration, host: String) throws(SnapSyncError) -> PreparedTLS {
            let name = tls.serverName ?? host
            let pin = try tls.pinnedPublicKeySHA256.map { (base64) throws(SnapSyncError) in try CertificatePin(base64: base64, host: name) }
            do {
                var configuration = NIOSSL.TLSConfiguration.makeClientConfiguration()
                configuration.minimumTLSVersion = .tlsv12
                switch tls.trustRoots {
                case .system:
                    configuration.trustRoots = .default
                case .certificates(let pem):
                    configuration.trustRoots = .certificates(try PEM.certificates(in: pem).map { try NIOSSLCertificate(bytes: $0, format: .der) })
                }
                if let client = tls.clientCertificate {
                    configuration.certificateChain = try PEM.certificates(in: client.certificateChainPEM).map {
                        .certificate(try NIOSSLCertificate(bytes: $0, format: .der))
                    }
                    configuration.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(client.privateKeyPEM.utf8), format: .pem))
                }
                let context = try NIOSSLContext(configuration: configuration)
                configuration.certificateVerification = .none
                let inspectionContext = try NIOSSLContext(configuration: configuration)
                let isAddress = (try? SocketAddress(ipAddress: name, port: 0)) != nil
                return PreparedTLS(
                    context: context, inspectionContext: inspectionContext, sniName: isAddress ? nil : name,
                    verifiedName: name, pin: pin)
            } catch {
                throw .tlsConfigurationInvalid(host: name, reason: "\(error)")
            }
        }

        /// The one place that maps NIOSSL's errors to `SnapSyncError`; nil for an error that is
        /// not about TLS.
        ///
        /// BoringSSL reports every refused chain as one error, CERTIFICATE_VERIFY_FAILED, and
        /// NIOSSL does not pass on its reason. To tell an expired certificate from an untrusted
        /// one, the client then makes one more handshake without verification, only to read the
        /// server's certificate and its dates; it sends nothing over it.
        static func describe(_ error: any Error, target: TransportTarget) async -> SnapSyncError? {
            let host = target.verifiedName
            switch error {
            case let error as NIOSSLExtraError where error == .failedToValidateHostname:
                return .tlsHostnameMismatch(host: host, reason: "\(error)")
            case NIOSSLError.uncleanShutdown:
                // A peer that closes without close_notify: the frames, not TLS, say whether a
                // message was whole, as on the plain port.
                return .connectionLost("the server closed the connection (without TLS close_notify)")
            case NIOSSLError.handshakeFailed(let error) where reasons(error).contains("CERTIFICATE_VERIFY_FAILED"):
                let now = Int(time(nil))
                if let validity = await certificateValidity(target), let problem = validity.problem(at: now) {
                    return .tlsCertificateExpired(host: host, reason: problem)
                }
                return .tlsUntrustedCertificate(host: host, reason: "the chain does not lead to a trust root (\(reasons(error)))")
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

        /// The validity dates of the certificate the server presents, from a handshake that
        /// verifies nothing; nil when that fails too.
        private static func certificateValidity(_ target: TransportTarget) async -> CertificateValidity? {
            guard let tls = target.tls else { return nil }
            let promise = group.next().makePromise(of: CertificateValidity?.self)
            ClientBootstrap(group: group)
                .connectTimeout(TimeAmount(target.connectTimeout))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: tls.inspectionContext, serverHostname: tls.sniName))
                        try channel.pipeline.syncOperations.addHandler(PeerCertificateReader(promise))
                    }
                }
                .connect(host: target.host, port: target.port)
                .whenFailure { _ in promise.succeed(nil) }
            return try? await promise.futureResult.get()
        }
    }

    /// The dates between which a certificate is valid, in seconds since 1970.
    struct CertificateValidity: Sendable {
        var notBefore: Int
        var notAfter: Int

        /// Why the certificate is not valid at `now`, or nil.
        func problem(at now: Int) -> String? {
            if now > notAfter { return "it expired \(now - notAfter) seconds ago" }
            if now < notBefore { return "it is valid only in \(notBefore - now) seconds" }
            return nil
        }
    }

    /// Reads the server's certificate once the (unverified) handshake is done, then closes.
    private final class PeerCertificateReader: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private let promise: EventLoopPromise<CertificateValidity?>
        private var answered = false

        init(_ promise: EventLoopPromise<CertificateValidity?>) { self.promise = promise }

        private func answer(_ validity: CertificateValidity?) {
            guard !answered else { return }
            answered = true
            promise.succeed(validity)
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
                let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
                answer(handler?.peerCertificate.map { CertificateValidity(notBefore: Int($0.notValidBefore), notAfter: Int($0.notValidAfter)) })
                context.close(promise: nil)
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            answer(nil)
            context.fireChannelInactive()
        }
    }
#endif
