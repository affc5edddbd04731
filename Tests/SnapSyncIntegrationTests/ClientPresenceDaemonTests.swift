@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import Testing

// Presence (protocol version 4) through the client library against the real snapsyncd, whose
// presence interval is short so that the PRESENCE_DIFFs come soon; every wait is a hang bound,
// never a speed limit, and the assertions are about what arrives, not when.

private struct Cursor: Codable, Sendable, Equatable {
    var row: Int
    var editing: String?
}

@Suite("Client presence against the real daemon", .serialized)
struct ClientPresenceDaemonTests {
    @Test(
        "A watches: B joins (principal its client name), sets a typed state, changes it, leaves (left); C disconnects (disconnected)",
        .timeLimit(.minutes(5)))
    func watchOthers() async throws {
        let daemon = try DaemonProcess.start(arguments: ["--presence-interval", "10ms"])
        defer { daemon.stop() }
        let room = "presence"
        let a = try await connectedClient(daemon, "A")
        #expect(await a.protocolVersion == 4)
        let replicaA = try await a.join(room)
        let log = PresenceLog.start(replicaA)
        let initial = try await log.wait(for: "A's initial set") { !$0.isEmpty }
        let idA = try #require(await a.sessionID)
        #expect(initial[0].kind == .initial)
        #expect(initial[0].presence.selfMemberID == idA)
        #expect(initial[0].presence.me?.principal == "A")
        #expect(initial[0].presence.count == 1)

        let b = try await connectedClient(daemon, "B")
        let replicaB = try await b.join(room)
        let idB = try #require(await b.sessionID)
        var updates = try await log.wait(for: "B joined") { $0.last?.presence[memberID: idB] != nil }
        #expect(updates.last?.presence[memberID: idB]?.principal == "B")
        #expect(updates.last?.presence.count == 2)
        #expect(updates.contains { $0.joined.map(\.memberID) == [idB] })

        let typedB = TypedReplica(replicaB, coding: RoomCoding<String, String, String>())
        try await typedB.setPresence(Cursor(row: 1, editing: "title"))
        updates = try await log.wait(for: "B's first state") { updates in
            (try? updates.last?.presence[memberID: idB]?.state(as: ElementCoder<Cursor>.json, room: room)) == Cursor(row: 1, editing: "title")
        }
        try await typedB.setPresence(Cursor(row: 2))
        updates = try await log.wait(for: "B's second state") { updates in
            (try? updates.last?.presence[memberID: idB]?.state(as: ElementCoder<Cursor>.json, room: room)) == Cursor(row: 2)
        }
        let typedA = TypedReplica(replicaA, coding: RoomCoding<String, String, String>())
        let states = try #require(try typedA.presenceStates(as: Cursor.self))
        #expect(states.map { $0.member.memberID } == [idA, idB].sorted())
        #expect(states.first { $0.member.memberID == idB }?.state == Cursor(row: 2))
        #expect(states.first { $0.member.memberID == idA }?.state == nil, "A set no state")
        // Every set the stream delivered was a valid one.
        for update in updates { #expect(update.presence.checkInvariants() == []) }

        try await b.leave(room)
        updates = try await log.wait(for: "B left") { $0.contains { $0.departures.contains { $0.memberID == idB } } }
        let departure = try #require(updates.lazy.flatMap(\.departures).first { $0.memberID == idB })
        #expect(departure.reason == .left)
        #expect(updates.last?.presence[memberID: idB] == nil)
        #expect(updates.last?.presence.count == 1)

        let c = try await connectedClient(daemon, "C")
        _ = try await c.join(room)
        let idC = try #require(await c.sessionID)
        _ = try await log.wait(for: "C joined") { $0.last?.presence[memberID: idC] != nil }
        await c.close()
        updates = try await log.wait(for: "C's connection closed") { $0.contains { $0.departures.contains { $0.memberID == idC } } }
        #expect(updates.lazy.flatMap(\.departures).first { $0.memberID == idC }?.reason == .disconnected)
        #expect(updates.last?.presence.others == [])

        await a.close()
        await b.close()
    }

    @Test(
        "setPresence over max_presence_bytes fails typed; listPresence pages; a cleared state is empty; a second stream starts with the set",
        .timeLimit(.minutes(5)))
    func limitsAndPages() async throws {
        let daemon = try DaemonProcess.start(arguments: ["--presence-interval", "10ms", "--max-presence-bytes", "64"])
        defer { daemon.stop() }
        let room = "pages"
        var clients: [SnapSyncClient] = []
        for k in 0..<3 {
            let client = try await connectedClient(daemon, "member-\(k)")
            _ = try await client.join(room)
            clients.append(client)
        }
        let replica = try #require(await clients[0].replica(room))
        #expect(await clients[0].serverLimits.maxPresenceBytes == 64)
        do throws(SnapSyncError) {
            try await replica.setPresence([UInt8](repeating: 7, count: 65))
            Issue.record("a state over the limit was set")
        } catch {
            #expect(error.kind == .rejected)
            #expect(error.code == .payloadTooLarge)
            #expect("\(error)".contains("SET_PRESENCE pages"))
        }
        try await replica.setPresence([UInt8](repeating: 7, count: 64))

        // Pages of one member, in member id order, until `next` is nil.
        var listed: [PresenceMember] = []
        var after: UInt64 = 0
        while true {
            let page = try await replica.listPresence(after: after, limit: 1)
            #expect(page.count == 3)
            #expect(page.members.count <= 1)
            listed += page.members
            guard let next = page.next else { break }
            after = next
        }
        var ids: [UInt64] = []
        for client in clients { ids.append(try #require(await client.sessionID)) }
        #expect(listed.map(\.memberID) == ids.sorted())
        #expect(listed.first { $0.memberID == ids[0] }?.state == [UInt8](repeating: 7, count: 64))

        let log = PresenceLog.start(replica)
        _ = try await log.wait(for: "the initial set") { !$0.isEmpty }
        try await replica.clearPresence()
        _ = try await log.wait(for: "the cleared state") { $0.last?.presence.me?.state == [] }
        // A second stream starts with the set known now, as `.initial`, without a second watch.
        var second = replica.presence.makeAsyncIterator()
        let first = try #require(try await second.next())
        #expect(first.kind == .initial)
        #expect(first.presence.count == 3)

        // The room left: the streams end.
        try await clients[0].leave(room)
        _ = try await eventually("the stream ended") { await log.finished }
        #expect(await log.failure == nil)
        for client in clients { await client.close() }
    }

    @Test(
        "after a reconnect the watch is made again on the new connection: a new member id, the state set again, the old member gone",
        .timeLimit(.minutes(5)))
    func rewatchAfterReconnect() async throws {
        let daemon = try DaemonProcess.start(arguments: ["--presence-interval", "10ms"])
        defer { daemon.stop() }
        let room = "again"
        let a = try await connectedClient(daemon, "A")
        let replicaA = try await a.join(room)
        let b = try await connectedClient(daemon, "B")
        let replicaB = try await b.join(room)
        let logA = PresenceLog.start(replicaA)
        let logB = PresenceLog.start(replicaB)
        let oldA = try #require(await a.sessionID)
        try await replicaA.setPresence(Array("here".utf8))
        _ = try await logB.wait(for: "A's state") { $0.last?.presence[memberID: oldA]?.state == Array("here".utf8) }
        _ = try await logA.wait(for: "A's own state") { $0.last?.presence.me?.state == Array("here".utf8) }

        await a.dropConnection()
        // A's new connection watches again: a new `.initial` whose own member is the new
        // session (the PRESENCE may predate A's own join, which a PRESENCE_DIFF then brings).
        let updates = try await logA.wait(for: "the set of the new connection") { updates in
            guard let last = updates.last, let selfID = last.presence.selfMemberID, selfID != oldA else { return false }
            return updates.contains { $0.kind == .initial && $0.presence.selfMemberID == selfID } && last.presence.me != nil
                && last.presence[memberID: oldA] == nil
        }
        let newA = try #require(updates.last?.presence.selfMemberID)
        let current = await a.sessionID
        #expect(newA == current)
        #expect(updates.last?.presence.count == 2)
        // B saw the old connection go and the new one come, with the state set again.
        let seen = try await logB.wait(for: "A's new member with its state") { $0.last?.presence[memberID: newA]?.state == Array("here".utf8) }
        #expect(seen.lazy.flatMap(\.departures).first { $0.memberID == oldA }?.reason == .disconnected)
        #expect(seen.last?.presence[memberID: oldA] == nil)
        #expect(await logA.failure == nil)
        await a.close()
        await b.close()
    }
}
