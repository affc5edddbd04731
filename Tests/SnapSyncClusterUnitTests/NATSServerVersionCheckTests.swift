import Logging
import Synchronization
import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
@testable import SnapSyncCluster

// The start-up check of cluster mode on each server's INFO (the probe itself, against real
// servers, is in the cluster lane's NATSServerProbeTests).

@Suite(.unitTests) struct NATSServerVersionCheckTests {
    typealias Answer = Result<NATSServerProbe.Info, NATSServerProbe.ProbeFailure>

    typealias Lines = LogCapture

    private func check(_ answers: [String: Answer], allowUnsafe: Bool, lines: Lines = Lines()) -> Result<Void, NATSError> {
        Result { () throws(NATSError) in
            try NATSServerVersionCheck.check(servers: answers.keys.sorted(), allowUnsafe: allowUnsafe, logger: lines.logger) { url in
                answers[url] ?? .failure(.init(message: "no such server"))
            }
        }
    }

    private static let old: Answer = .success(.init(version: "2.9.10", name: "n2"))
    private static let current: Answer = .success(.init(version: "2.15.1", name: "n1"))

    @Test func anOldServerIsRefusedNamingItsURLNameVersionAndTheReason() throws {
        let result = check(["nats://a:4222": Self.current, "nats://b:4222": Self.old], allowUnsafe: false)
        guard case .failure(let error) = result else { Issue.record("accepted"); return }
        #expect(error.code == .refusedServer)
        #expect(error.identifier == "nats://b:4222")
        #expect(error.text.contains("nats-server n2 at nats://b:4222 is version 2.9.10"))
        #expect(error.text.contains("can lose acknowledged writes"))
        #expect(error.text.contains("--cluster-allow-unsafe-nats-server"))
    }

    @Test func theFlagTurnsTheRefusalIntoAWarning() throws {
        let lines = Lines()
        try check(["nats://b:4222": Self.old], allowUnsafe: true, lines: lines).get()
        #expect(lines.all.contains { $0.hasPrefix("warning: nats-server n2 at nats://b:4222 is version 2.9.10") })
    }

    @Test func maintainedServersPassWithoutAWarning() throws {
        let lines = Lines()
        try check(["nats://a:4222": Self.current, "nats://c:4222": .success(.init(version: "2.10.23", name: nil))], allowUnsafe: false, lines: lines).get()
        #expect(!lines.all.contains { $0.hasPrefix("warning") || $0.hasPrefix("notice") })
    }

    @Test func aServerThatGivesNoInfoIsLeftToLibnats() throws {
        let lines = Lines()
        try check(["nats://a:4222": .failure(.init(message: "connect: Connection refused"))], allowUnsafe: false, lines: lines).get()
        #expect(lines.all.contains { $0.hasPrefix("notice: could not learn the version of the nats-server at nats://a:4222") })
    }

    /// `--cluster` URLs may carry a user and password (or a token): no log line or error shows them.
    @Test func credentialsInAURLAreNeverShown() throws {
        let lines = Lines()
        let url = "nats://alice:s3cret@b:4222"
        try check([url: Self.old, "tls://tok3n@c:4222": .failure(.init(message: "down"))], allowUnsafe: true, lines: lines).get()
        #expect(lines.all.contains { $0.hasPrefix("warning: nats-server n2 at nats://***@b:4222 is version 2.9.10") })
        #expect(lines.all.contains { $0.hasPrefix("notice: could not learn the version of the nats-server at tls://***@c:4222") })
        #expect(!lines.all.contains { $0.contains("s3cret") || $0.contains("tok3n") })
        guard case .failure(let error) = check([url: Self.old], allowUnsafe: false) else { Issue.record("accepted"); return }
        #expect(error.identifier == "nats://***@b:4222" && !"\(error)".contains("s3cret"))
        #expect(NATSURLRedaction.redacted("nats://h:4222") == "nats://h:4222")
        #expect(NATSURLRedaction.redacted("nats://u:p@[::1]:4222/x@y") == "nats://***@[::1]:4222/x@y")
        #expect(NATSURLRedaction.redacted(["nats://a@h", "nats://k"]) == "nats://***@h,nats://k")
    }

    @Test func anUnreadableVersionIsRefused() {
        let result = check(["nats://a:4222": .success(.init(version: "main", name: nil))], allowUnsafe: false)
        guard case .failure(let error) = result else { Issue.record("accepted"); return }
        #expect(error.text.contains("is version main: a version this daemon cannot read"))
    }

    @Test func theProbeReadsTheINFOLinesVersionAndName() throws {
        let line = Array(#"INFO {"server_id":"NABC","server_name":"n1","version":"2.15.1","proto":1,"max_payload":8388608}"#.utf8)
        #expect(try NATSServerProbe.parse(line) == .init(version: "2.15.1", name: "n1"))
        #expect(try NATSServerProbe.parse(Array(#"INFO {"server_id":"NABC","version":"2.9.10"}"#.utf8)).name == "NABC")
        #expect(throws: NATSServerProbe.ProbeFailure.self) { try NATSServerProbe.parse(Array("-ERR 'nope'".utf8)) }
        #expect(throws: NATSServerProbe.ProbeFailure.self) { try NATSServerProbe.parse(Array(#"INFO {"server_id":"x"}"#.utf8)) }
        #expect(throws: NATSServerProbe.ProbeFailure.self) { try NATSServerProbe.parse(Array("INFO not json".utf8)) }
    }

    @Test func theProbeFindsHostAndPortInEveryURLForm() {
        let cases: [(String, String, String)] = [
            ("nats://127.0.0.1:4222", "127.0.0.1", "4222"),
            ("tls://nats.example.com:7422", "nats.example.com", "7422"),
            ("nats://user:secret@host:1234", "host", "1234"),
            ("nats://host", "host", "4222"),
            ("nats://[::1]:4223", "::1", "4223"),
            ("nats://[::1]", "::1", "4222"),
        ]
        for (url, host, port) in cases {
            let found = NATSServerProbe.address(of: url)
            #expect(found?.host == host && found?.port == port, "\(url): \(String(describing: found))")
        }
        #expect(NATSServerProbe.address(of: "nats://:4222") == nil)
    }
}
