import Testing
import SnapSyncModel
import SnapSyncWire

// Presence against the real daemon (PROTOCOL.md §9 "Presence"): a watcher on a version 4
// connection sees members of every version join, set a state, and leave with why — LEAVE, a
// closed socket, the idle timeout, a DROP — through the daemon's presence timer.

extension ServerIntegration {
    @Suite struct Presence {
        /// A member's WELCOME session id, which is its member id.
        static func connect(_ daemon: DaemonProcess, name: String, versions: [UInt64] = [4, 3, 2, 1]) throws -> (RawClient, UInt64) {
            let client = try RawClient(host: daemon.host, port: daemon.port)
            guard case .welcome(_, let id, _, _) = try client.handshake(name: name, versions: versions) else {
                throw RawClientError.failed("no WELCOME")
            }
            return (client, id)
        }

        /// The next PRESENCE_DIFF's changes, keeping the watcher alive meanwhile (a PING a
        /// quarter second, since the test's idle timeout is short), within `seconds`.
        static func nextChanges(_ watcher: RawClient, seconds: Double = 10) throws -> (count: UInt64, changes: [PresenceChange]) {
            for _ in 0..<Int(seconds * 4) {
                try watcher.send(.ping(nonce: 1))
                do {
                    let (message, _) = try watcher.receive(until: { $0.type == .presenceDiff }, timeout: 0.25)
                    if case .presenceDiff(_, let count, let changes) = message { return (count, changes) }
                } catch RawClientError.timeout {
                    continue
                }
            }
            throw RawClientError.timeout("a PRESENCE_DIFF")
        }

        @Test func aWatcherSeesJoinsStatesAndWhyMembersLeft() throws {
            let daemon = try DaemonProcess.start(arguments: ["--presence-interval", "10ms", "--idle-timeout", "1s"])
            defer { daemon.stop() }
            let (watcher, watcherID) = try Self.connect(daemon, name: "watcher")
            _ = try watcher.join("board")
            let (answer, _) = try watcher.request { .presenceWatch(requestID: $0, room: "board", watch: true) }
            guard case .presence(_, "board", 1, let members, 0) = answer else {
                Issue.record("expected PRESENCE of the watcher alone, got \(summary(answer))")
                return
            }
            #expect(members.map(\.memberID) == [watcherID] && members.first?.principal == "watcher")

            // A version 1 member is in the presence too; it cannot see it.
            let (old, oldID) = try Self.connect(daemon, name: "old", versions: [1])
            _ = try old.join("board")
            var seen = try Self.nextChanges(watcher)
            guard seen.count == 2, case .joined(let joined)? = seen.changes.first else {
                Issue.record("expected old joined, got \(seen)")
                return
            }
            #expect(joined.memberID == oldID && joined.principal == "old" && joined.joinedAt > 1_700_000_000_000)

            let (bob, bobID) = try Self.connect(daemon, name: "bob")
            _ = try bob.join("board")
            _ = try Self.nextChanges(watcher)
            let (ack, _) = try bob.request { .setPresence(requestID: $0, room: "board", state: Array(#"{"card":7}"#.utf8)) }
            #expect(ack.type == .ack)
            seen = try Self.nextChanges(watcher)
            #expect(seen.changes == [.state(memberID: bobID, state: Array(#"{"card":7}"#.utf8))])

            _ = try bob.request { .leave(requestID: $0, room: "board") }
            seen = try Self.nextChanges(watcher)
            #expect(seen.changes == [.left(memberID: bobID, reason: PresenceDeparture.left.rawValue)] && seen.count == 2)

            // The version 1 member sends nothing: the daemon PINGs it after 1 s and closes it
            // after 2 s without an answer.
            seen = try Self.nextChanges(watcher, seconds: 15)
            #expect(seen.changes == [.left(memberID: oldID, reason: PresenceDeparture.timedOut.rawValue)] && seen.count == 1)

            let (carol, carolID) = try Self.connect(daemon, name: "carol")
            _ = try carol.join("board")
            _ = try Self.nextChanges(watcher)
            carol.shutdownWrite()
            seen = try Self.nextChanges(watcher)
            #expect(seen.changes == [.left(memberID: carolID, reason: PresenceDeparture.disconnected.rawValue)])

            let stats = try watcher.stats()
            #expect((stats["presence_frames_out"] ?? 0) >= 7 && stats["presence_updates"] == 1)
        }

        /// More watchers than one loop pass hands a frame to (`Hub.presenceDeliveriesPerPass`):
        /// the frame reaches every one of them, once, over several passes.
        @Test func aFrameReachesEveryWatcherOverSeveralPasses() throws {
            // A view of all 101 members, so that the writer's state is shown.
            let daemon = try DaemonProcess.start(arguments: ["--presence-interval", "10ms", "--presence-view", "200"])
            defer { daemon.stop() }
            var watchers: [RawClient] = []
            for index in 0..<100 {
                let (watcher, _) = try Self.connect(daemon, name: "w\(index)")
                _ = try watcher.join("crowd")
                _ = try watcher.request { .presenceWatch(requestID: $0, room: "crowd", watch: true) }
                watchers.append(watcher)
            }
            let (writer, writerID) = try Self.connect(daemon, name: "writer")
            _ = try writer.join("crowd")
            _ = try writer.request { .setPresence(requestID: $0, room: "crowd", state: [42]) }
            for watcher in watchers {
                var seenState = false
                while !seenState {
                    let (message, _) = try watcher.receive(until: { $0.type == .presenceDiff })
                    guard case .presenceDiff(_, _, let changes) = message else { continue }
                    if changes.contains(.state(memberID: writerID, state: [42])) { seenState = true }
                    if case .joined(let member)? = changes.first(where: { $0.memberID == writerID }), member.state == [42] { seenState = true }
                }
            }
            #expect(watchers.allSatisfy { $0.isQuiet(for: 0.05) }, "each watcher got the frame once")
        }

        @Test func aDropEndsThePresenceWithTheRoom() throws {
            let daemon = try DaemonProcess.start(arguments: ["--presence-interval", "10ms"])
            defer { daemon.stop() }
            let (watcher, _) = try Self.connect(daemon, name: "watcher")
            let (member, _) = try Self.connect(daemon, name: "member")
            _ = try watcher.join("r")
            _ = try member.join("r")
            _ = try watcher.request { .presenceWatch(requestID: $0, room: "r", watch: true) }
            _ = try member.request { .drop(requestID: $0, room: "r") }
            let (left, skipped) = try watcher.receive(until: { $0.type == .left })
            #expect(left.errorCode == .roomDeleted)
            #expect(!skipped.contains { $0.type == .presenceDiff })
            #expect(watcher.isQuiet(for: 0.2), "no presence after the LEFT")
            // The room made again has a presence of its own.
            _ = try watcher.join("r")
            let (answer, _) = try watcher.request { .presenceWatch(requestID: $0, room: "r", watch: true) }
            guard case .presence(_, _, 1, _, _) = answer else {
                Issue.record("expected the new room's presence, the watcher alone: \(summary(answer))")
                return
            }
        }
    }
}
