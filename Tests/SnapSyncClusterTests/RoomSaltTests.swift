import SnapSyncLoop
import Foundation
import Testing

@testable import SnapSyncCluster

extension RealNATSCluster {
    /// The salt of every epoch (Protocol/CLUSTER.md, "Epochs") is the same for every node: nodes
    /// that start together on a fresh cluster, and one that starts after the stream's leader died.
    @Suite struct RoomSaltTests {
        /// Three nodes connect at once, from three threads, each to another server of a fresh
        /// cluster (so all three may create the stream and publish a salt), then a fourth after the
        /// stream's leader was killed: all derive the same epochs.
        @Test func nodesStartingTogetherAndLaterDeriveTheSameEpochs() throws {
            let cluster = try TestCluster()
            defer { try? cluster.down() }
            try EventLoop.enableThreadedAccess()
            let results = StartResults()
            let group = DispatchGroup()
            for index in 0..<3 {
                let url = cluster.urls[index]
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    results.add(Result { try StartResults.start(servers: [url]) })
                }
            }
            group.wait()
            let started = try results.all.map { try $0.get() }
            #expect(started.count == 3)
            let first = try #require(started.first)
            for node in started { #expect(node == first) }

            // The stream's leader dies: a node started now reads the salt from the new leader.
            let leader = try #require(try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls).leader)
            let index = try #require(["n1", "n2", "n3"].firstIndex(of: leader))
            try cluster.kill(server: index)
            let others = cluster.urls.enumerated().filter { $0.offset != index }.map(\.element)
            var later: StartedNode?
            let deadline = ContinuousClock.now + .seconds(60)
            while later == nil, ContinuousClock.now < deadline {
                later = try? StartResults.start(servers: others)
            }
            #expect(try #require(later, "no node could start without \(leader)") == first)
        }

        /// The salt is the first message of `snapsync.salt`, not the stream's first message: here
        /// a stream made before the salt subject was added to it holds a hex payload at sequence
        /// 1 on a room's subject, which the salt must not be.
        @Test func theSaltIsTheFirstMessageOfItsSubjectNotOfTheStream() throws {
            let cluster = try TestCluster()
            defer { try? cluster.down() }
            var older = StreamSpec.rooms()
            older.subjects = ["snapsync.room.>"]
            older.saltSubject = RoomSubjects.subject(room: "lobby")
            let decoy = try #require(try StreamProvisioning.ensureStream(older, servers: cluster.urls).salt)
            let info = try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls)
            let salt = try #require(info.salt)
            #expect(salt != decoy)
            #expect(try StreamProvisioning.ensureStream(.rooms(), servers: [cluster.urls[2]]).salt == salt)
        }

        /// The salt is the first message's payload, 32 lowercase hex digits; JetStream's 404 is no
        /// salt yet; anything else is refused, naming the message.
        @Test func theFirstSaltIsReadFromTheMessageGetAnswer() {
            func answer(_ payload: String) -> [UInt8] {
                let data = Data(payload.utf8).base64EncodedString()
                return Array(#"{"message":{"subject":"snapsync.salt","seq":3,"data":"\#(data)","time":"2026-11-23T17:00:00Z"}}"#.utf8)
            }
            let salt = "5f2b9c1e8a7d4036b1e9f0c2d4a6b8e0"
            #expect(JetStreamAPIResponse.firstSalt(answer: answer(salt)) == .salt(salt))
            #expect(
                JetStreamAPIResponse.firstSalt(answer: Array(#"{"error":{"code":404,"err_code":10037,"description":"no message found"}}"#.utf8))
                    == .none)
            for bad in [salt.uppercased(), String(salt.dropLast()), salt + "0", ""] {
                guard case .refused(let why) = JetStreamAPIResponse.firstSalt(answer: answer(bad)) else {
                    Issue.record("salt \(bad) accepted")
                    continue
                }
                #expect(why.contains("sequence 3"))
            }
            #expect(JetStreamAPIResponse.firstSalt(answer: Array("not json".utf8)) != .none)
        }
    }
}

/// What a started node derived: its salt and its epochs of two rooms.
struct StartedNode: Equatable, Sendable {
    var salt: String
    var lobby: UInt64
    var failover: UInt64
}

/// The nodes' start-ups, from their threads.
final class StartResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<StartedNode, any Error>] = []

    func add(_ result: Result<StartedNode, any Error>) {
        lock.withLock { results.append(result) }
    }

    var all: [Result<StartedNode, any Error>] { lock.withLock { results } }

    /// A node's start-up on a loop of its own, on the calling thread.
    static func start(servers: [String]) throws -> StartedNode {
        let loop = try EventLoop(locking: true)
        let log = try JetStreamRoomLog.connect(servers: servers, loop: loop, logger: testLogger, requestTimeout: .seconds(5))
        defer { log.close() }
        return StartedNode(salt: log.salt, lobby: log.epoch(room: "lobby", after: 0), failover: log.epoch(room: "failover", after: 0))
    }
}
