import Foundation
import Testing
#if canImport(Glibc)
    import Glibc
#endif
import SnapSyncModel
import SnapSyncWire

// The TLS listener from outside: `openssl s_client` completes the handshake and a HELLO/WELCOME
// by raw bytes, and a bad certificate or key stops the daemon at start with a clear error. The
// rest (snapcat --tls, protocol confusion, reload, mutual TLS, fan-out) is in
// scripts/tests/test_daemon_tls.py.

extension ServerIntegration {
    @Suite struct TLS {
        @Test func openSSLClientCompletesTheHandshakeAndHello() throws {
            let certificates = try TestCertificates()
            let daemon = try DaemonProcess.start(arguments: certificates.daemonArguments)
            defer { daemon.stop() }
            let port = try daemon.tlsPort()

            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", certificates.path("ca.pem"),
                "-verify_return_error", "-quiet",
            ]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            defer {
                // SIGKILL: SIGTERM may be blocked in the test runner's mask, which s_client inherits.
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                process.waitUntilExit()
            }
            input.fileHandleForWriting.write(Data(FrameEncoder().encode(.hello(versions: [1], clientName: "s_client", credentials: []))))

            var decoder = FrameDecoder(limits: WireLimits(maxFrameBytes: 1 << 20), accepting: .server)
            var welcome: Message?
            while welcome == nil {
                let data = output.fileHandleForReading.availableData
                guard !data.isEmpty else { break }  // s_client exited: the handshake failed
                decoder.append(data)
                welcome = try decoder.nextMessage()
            }
            let received = try #require(welcome, "no frame from s_client; daemon log:\n\(daemon.log)")
            guard case .welcome = received else {
                Issue.record("expected WELCOME, got \(received)")
                return
            }
            #expect(daemon.waitForLog("kernel TLS "), "the first handshake logs whether kernel TLS is in use")
        }

        /// A certificate that expired is served with a warning at start, its notAfter in the
        /// start line and in snapsync_tls_certificate_expiry_timestamp_seconds; reloaded (SIGHUP)
        /// to one that expires in under 3 days, the reload line, a warning and the metric follow it.
        @Test func anExpiredOrExpiringCertificateIsWarnedOfAndExported() throws {
            let certificates = try TestCertificates()
            let expired = 1_577_923_200  // 2020-01-02T00:00:00Z
            try certificates.makeSelfSigned("expired", notBefore: expired - 86_400, notAfter: expired)
            let now = Int(Date().timeIntervalSince1970)
            // An hour short of 3 days, so that the warning says 2 days however soon the daemon reads it.
            let soon = now + 3 * 86_400 - 3_600
            try certificates.makeSelfSigned("soon", notBefore: now - 86_400, notAfter: soon)
            let soonText = String(TestCertificates.asn1Time(soon).dropLast())  // YYYYMMDDHHMMSS
            let soonISO =
                "\(soonText.prefix(4))-\(soonText.dropFirst(4).prefix(2))-\(soonText.dropFirst(6).prefix(2))T"
                + "\(soonText.dropFirst(8).prefix(2)):\(soonText.dropFirst(10).prefix(2)):\(soonText.dropFirst(12).prefix(2))Z"
            let fileManager = FileManager.default
            try fileManager.copyItem(atPath: certificates.path("expired.pem"), toPath: certificates.path("served.pem"))
            try fileManager.copyItem(atPath: certificates.path("expired.key"), toPath: certificates.path("served.key"))

            let daemon = try DaemonProcess.start(arguments: [
                "--tls-listen", "127.0.0.1:0", "--tls-cert", certificates.path("served.pem"), "--tls-key", certificates.path("served.key"),
                "--metrics-listen", "127.0.0.1:0",
            ])
            defer { daemon.stop() }
            _ = try daemon.tlsPort()
            #expect(daemon.waitForLog("not_after=2020-01-02T00:00:00Z"), "the start line names notAfter")
            #expect(daemon.waitForLog("the TLS certificate expired at 2020-01-02T00:00:00Z"))
            let metrics = try MetricsAddress(daemon)
            #expect(try metrics.scrape()["snapsync_tls_certificate_expiry_timestamp_seconds"] == Double(expired))

            for suffix in ["pem", "key"] {
                try fileManager.removeItem(atPath: certificates.path("served.\(suffix)"))
                try fileManager.copyItem(atPath: certificates.path("soon.\(suffix)"), toPath: certificates.path("served.\(suffix)"))
            }
            daemon.signal(SIGHUP)
            #expect(daemon.waitForLog("TLS certificate reloaded"))
            #expect(daemon.waitForLog("not_after=\(soonISO)"), "the reload line names notAfter")
            #expect(daemon.waitForLog("the TLS certificate expires at \(soonISO), in 2 days"))
            #expect(try metrics.scrape()["snapsync_tls_certificate_expiry_timestamp_seconds"] == Double(soon))
        }

        @Test func aKeyThatDoesNotMatchTheCertificateStopsTheStart() throws {
            let certificates = try TestCertificates()
            let result = try DaemonProcess.run(arguments: [
                "--port", "0", "--data-dir", certificates.path("data"), "--tls-listen", "127.0.0.1:0",
                "--tls-cert", certificates.path("server.pem"), "--tls-key", certificates.path("ca.key"),
            ])
            #expect(result.status != 0)
            #expect(result.output.contains("cannot start the TLS listener: loading the private key \(certificates.path("ca.key")) failed"), "\(result.output)")
            #expect(result.output.contains("key values mismatch"), "\(result.output)")
            #expect(!result.output.contains("listening on"), "\(result.output)")
        }

        @Test func aMissingCertificateStopsTheStart() throws {
            let certificates = try TestCertificates()
            let result = try DaemonProcess.run(arguments: [
                "--port", "0", "--data-dir", certificates.path("data"), "--tls-listen", "127.0.0.1:0",
                "--tls-cert", certificates.path("missing.pem"), "--tls-key", certificates.path("server.key"),
            ])
            #expect(result.status != 0)
            #expect(
                result.output.contains("cannot start the TLS listener: loading the certificate chain \(certificates.path("missing.pem")) failed"),
                "\(result.output)")
        }

        @Test func thePlainListenerCanBeTurnedOff() throws {
            let certificates = try TestCertificates()
            let daemon = try DaemonProcess.start(arguments: certificates.daemonArguments + ["--port", "off"])
            defer { daemon.stop() }
            #expect(daemon.port == (try daemon.tlsPort()), "the only listening line is the TLS one")
            #expect(!daemon.log.contains("info listening on"), "\(daemon.log)")
        }

        @Test func tlsFlagsNeedTheirPartners() throws {
            let noCertificate = try DaemonProcess.run(arguments: ["--tls-listen", "127.0.0.1:0"])
            #expect(noCertificate.status != 0)
            #expect(noCertificate.output.contains("--tls-listen needs --tls-cert and --tls-key"), "\(noCertificate.output)")
            let nowhere = try DaemonProcess.run(arguments: ["--port", "off"])
            #expect(nowhere.status != 0)
            #expect(nowhere.output.contains("--port off needs --tls-listen"), "\(nowhere.output)")
        }
    }
}
