import Testing
import SnapSyncTestThreads
import SnapSyncCluster

// Which nats-server versions cluster mode refuses: those whose JetStream is known to lose
// acknowledged writes (docs/cluster.md, "Which nats-server").

@Suite(.unitTests) struct NATSServerVersionTests {
    private func version(_ text: String) throws -> NATSServerVersion {
        try #require(NATSServerVersion(text), "\(text) did not parse")
    }

    @Test(arguments: ["2.9.10", "2.10.0", "2.10.22", "1.4.1", "2.10.23-RC.1", "v2.10.22"])
    func versionsWithKnownDataLossAreRefused(text: String) throws {
        let reason = try #require(try version(text).knownDataLoss, "\(text) was accepted")
        #expect(reason.contains("2.10.23"))
    }

    @Test(arguments: ["2.10.23", "2.10.24", "2.11.0", "2.11.0-RC.1", "2.15.1", "v2.15.1", "2.15.1+linux", "3.0", "10.0.0"])
    func maintainedVersionsAreAccepted(text: String) throws {
        #expect(try version(text).knownDataLoss == nil, "\(text) was refused")
    }

    @Test func twoNineSaysWhatThisProjectSawOfIt() throws {
        #expect(try version("2.9.10").knownDataLoss?.contains("2.9 also") == true)
        #expect(try version("2.10.22").knownDataLoss?.contains("2.9 also") == false)
    }

    @Test func partsArePutInOrderAsNumbersAndAPreReleaseComesBeforeItsRelease() throws {
        let ordered = ["2.9.10", "2.10.0", "2.10.9", "2.10.22", "2.10.23-RC.1", "2.10.23-RC.2", "2.10.23", "2.11.0-RC.1", "2.11.0", "2.15.1"]
        let versions = try ordered.map(version)
        #expect(versions == versions.sorted())
        #expect(versions.map(\.description) == ordered)
        for (a, b) in zip(versions, versions.dropFirst()) { #expect(a < b && !(b < a), "\(a) < \(b)") }
        #expect(try version("2.11") == version("2.11.0"))
        #expect(try version("2.15.1+build.7") == version("2.15.1"))
    }

    @Test(arguments: ["", "2", "two.ten.one", "2.10.x", "2..1", "2.10.23.1", "-2.10.0", "2.10.23-", "2.1٠.0", " 2.10.23"])
    func unreadableVersionsDoNotParse(text: String) {
        #expect(NATSServerVersion(text) == nil, "\(text) parsed")
    }
}
