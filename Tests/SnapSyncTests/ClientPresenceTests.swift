import Foundation
@testable import SnapSync
import SnapSyncClientTestSupport
import SnapSyncTestSupport
import SnapSyncWire
import Testing

// The presence set's apply (PROTOCOL.md §11.28) against a model of a room's presence, and the
// client's presence calls against a scripted server of an older protocol version.

/// A room's whole presence as a server holds it, and the view and PRESENCE_DIFF it owes a watcher.
private struct PresenceModel {
    var members: [UInt64: PresenceMember] = [:]
    let viewSize: Int

    var view: [PresenceMember] { members.values.sorted { $0.memberID < $1.memberID }.prefix(viewSize).map { $0 } }

    /// The PRESENCE_DIFF from `before` (a view, when `membersBefore` were the members) to the
    /// current view, as §9 describes it: `joined`/`left` for members that came or went,
    /// `shown`/`hidden` for the others that moved in or out of the view, `state` for those whose
    /// state changed; at most one per member, in a shuffled order.
    func diff(
        from before: [PresenceMember], membersBefore: Set<UInt64>, departed: [UInt64: UInt8], using random: inout SplitMix64
    ) -> [PresenceChange] {
        let old = Dictionary(uniqueKeysWithValues: before.map { ($0.memberID, $0) })
        let new = Dictionary(uniqueKeysWithValues: view.map { ($0.memberID, $0) })
        var changes: [PresenceChange] = []
        for (id, member) in new {
            if let previous = old[id] {
                if previous.state != member.state { changes.append(.state(memberID: id, state: member.state)) }
            } else {
                changes.append(membersBefore.contains(id) ? .shown(member) : .joined(member))
            }
        }
        for (id, _) in old where new[id] == nil {
            changes.append(members[id] == nil ? .left(memberID: id, reason: departed[id] ?? 0) : .hidden(memberID: id))
        }
        return changes.shuffled(using: &random)
    }
}

@Suite("Client: presence")
struct ClientPresenceTests {
    @Test("a presence set applies random PRESENCE_DIFFs to the view a model server computes, keeping its invariants")
    func applyFollowsTheModel() throws {
        for seed in UInt64(1)...40 {
            var random = SplitMix64(seed: seed)
            var model = PresenceModel(viewSize: Int.random(in: 1...8, using: &random))
            var set = PresenceSet(room: "r", count: 0, members: [], selfMemberID: 3)
            var nextID: UInt64 = 1
            for step in 0..<60 {
                let before = model.view
                let membersBefore = Set(model.members.keys)
                var departed: [UInt64: UInt8] = [:]
                // A few events between two PRESENCE_DIFFs: they are coalesced into one.
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0..<4:
                        // Ids are not always increasing: a member of another server may come in below.
                        let id = Bool.random(using: &random) ? nextID : UInt64.random(in: 1...(nextID + 5), using: &random)
                        nextID = max(nextID, id) + 1
                        guard model.members[id] == nil, departed[id] == nil else { continue }
                        model.members[id] = PresenceMember(memberID: id, principal: "p\(id % 3)", joinedAt: UInt64(step))
                    case 4..<7:
                        guard let id = model.members.keys.randomElement(using: &random) else { continue }
                        model.members[id] = nil
                        departed[id] = UInt8.random(in: 0...5, using: &random)
                    default:
                        guard let id = model.members.keys.randomElement(using: &random) else { continue }
                        let state: [UInt8] = Bool.random(using: &random) ? [] : [UInt8.random(in: 0...255, using: &random)]
                        model.members[id]!.state = state
                    }
                }
                let changes = model.diff(from: before, membersBefore: membersBefore, departed: departed, using: &random)
                set.apply(count: model.members.count, changes: changes)
                #expect(set.checkInvariants() == [], "seed \(seed), step \(step)")
                #expect(set.members == model.view, "seed \(seed), step \(step): \(changes)")
                #expect(set.count == model.members.count)
                #expect(set.me == model.members[3].flatMap { member in model.view.contains(member) ? member : nil })
            }
        }
    }

    @Test("apply: joined and shown add or replace, left and hidden remove, state replaces; unknown ids change nothing")
    func applyRules() {
        let a = PresenceMember(memberID: 5, principal: "a", joinedAt: 1)
        let b = PresenceMember(memberID: 2, principal: "b", joinedAt: 2, state: [1])
        var set = PresenceSet(room: "r", count: 2, members: [a, b], selfMemberID: 5)
        #expect(set.members.map(\.memberID) == [2, 5], "sorted by member id")
        #expect(set.me == a)
        #expect(set.others == [b])
        set.apply(count: 3, changes: [.state(memberID: 5, state: [9]), .joined(PresenceMember(memberID: 3, principal: "c", joinedAt: 3))])
        #expect(set.members.map(\.memberID) == [2, 3, 5])
        #expect(set[memberID: 5]?.state == [9])
        #expect(set.count == 3)
        // A `joined` of an id already there replaces the entry (§11.28).
        set.apply(count: 3, changes: [.joined(PresenceMember(memberID: 3, principal: "c2", joinedAt: 4))])
        #expect(set[memberID: 3]?.principal == "c2")
        set.apply(count: 2, changes: [.left(memberID: 2, reason: 1), .hidden(memberID: 5), .left(memberID: 77, reason: 0), .state(memberID: 78, state: [1])])
        #expect(set.members.map(\.memberID) == [3])
        #expect(set.me == nil)
        #expect(set.count == 2)
        #expect(set.checkInvariants() == [])
        #expect(PresenceSet(room: "r", count: 0, members: [a]).count == 1, "the count is at least the view")

        let update = PresenceUpdate(
            kind: .diff, presence: set, changes: [.joined(a), .left(memberID: 2, reason: 9), .state(memberID: 3, state: [])])
        #expect(update.joined == [a])
        #expect(update.departures.map { $0.reason } == [.disconnected], "an unknown reason reads as disconnected")
        #expect(update.stateChanges == [3])
    }

    @Test("typed states decode as JSON; a state that does not decode throws presenceCoding naming the member and room")
    func typedStates() throws {
        struct Cursor: Codable, Sendable, Equatable { var row: Int }
        let good = PresenceMember(memberID: 1, principal: "a", joinedAt: 0, state: Array(#"{"row":4}"#.utf8))
        let none = PresenceMember(memberID: 2, principal: "b", joinedAt: 0)
        let bad = PresenceMember(memberID: 3, principal: "c", joinedAt: 0, state: [0xFF])
        #expect(try good.state(as: ElementCoder<Cursor>.json, room: "r") == Cursor(row: 4))
        #expect(try none.state(as: ElementCoder<Cursor>.json, room: "r") == nil)
        let states = try PresenceSet(room: "r", count: 2, members: [good, none]).states(as: ElementCoder<Cursor>.json)
        #expect(states.map { $0.state } == [Cursor(row: 4), nil])
        do throws(SnapSyncError) {
            _ = try bad.state(as: ElementCoder<Cursor>.json, room: "r")
            Issue.record("bad bytes decoded")
        } catch {
            #expect(error.kind == .presenceCoding)
            #expect("\(error)".contains("member 3"))
            #expect("\(error)".contains("in r"))
        }
    }

    @Test("on a protocol version 3 connection, presence calls fail with unsupportedByServer, and the stream throws it", .timeLimit(.minutes(2)))
    func olderServer() async throws {
        let peer = try ScriptedPeer()
        let room = "r"
        let snapshot = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a")])])
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 3)
            let request = try peer.expectJoin(room, resume: nil)
            peer.send(
                .snapshot(
                    requestID: request, room: room, epoch: 7, version: 1, reason: .initial, digest: snapshot.digest, snapshot: snapshot,
                    chain: RoomChain.start(epoch: 7)))
            // Nothing more: a presence frame from the client would be a protocol violation
            // here, which the next request would show.
            let next = try peer.request()
            guard case .leave(let leave, room) = next else { throw ScriptedPeer.Failure(description: "expected LEAVE, got \(next)") }
            peer.send(.ack(requestID: leave, epoch: 0, version: 0))
        }
        let client = SnapSyncClient(configuration: peer.configuration())
        try await client.connect()
        let replica = try await client.join(room)
        #expect(await client.protocolVersion == 3)

        var updates = replica.presence.makeAsyncIterator()
        do throws(SnapSyncError) {
            _ = try await updates.next()
            Issue.record("the presence stream of a version 3 connection delivered")
        } catch {
            #expect(error.kind == .unsupportedByServer)
            #expect("\(error)".contains("PRESENCE_WATCH r"))
        }
        do throws(SnapSyncError) {
            try await replica.setPresence([1])
            Issue.record("SET_PRESENCE went out on version 3")
        } catch {
            #expect(error.kind == .unsupportedByServer)
            #expect("\(error)".contains("SET_PRESENCE r"))
        }
        do throws(SnapSyncError) {
            _ = try await replica.listPresence()
            Issue.record("PRESENCE_LIST went out on version 3")
        } catch {
            #expect(error.kind == .unsupportedByServer)
        }
        #expect(replica.presenceSet == nil)
        try await client.leave(room)
        #expect(await script.value == nil)
        await client.close()
    }
}

#if canImport(Observation)
    import Observation

    @Suite("Client: ObservablePresence")
    struct ClientObservablePresenceTests {
        @Test("an ObservablePresence follows the replica's presence on the main actor and ends with it")
        @MainActor
        func follows() async throws {
            let replica = RoomReplica(room: "r")
            // As if a stream had asked already: no client here to watch.
            replica.presenceBroadcast.publish { state in
                state.watchRequested = true
                return nil
            }
            let observed = ObservablePresence(replica)
            #expect(observed.count == 0)
            let me = PresenceMember(memberID: 4, principal: "me", joinedAt: 1)
            let other = PresenceMember(memberID: 9, principal: "other", joinedAt: 2)
            replica.presenceWatched(PresenceSet(room: "r", count: 1, members: [me], selfMemberID: 4))
            replica.presenceChanged(count: 2, changes: [.joined(other)])
            // The updates reach the main actor through a task: wait for them (a hang bound).
            let deadline = ContinuousClock.now + hangBound
            while observed.count != 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(observed.members == [me, other])
            #expect(observed.me == me)
            #expect(observed.others == [other])
            #expect(observed.lastUpdate?.kind == .diff)
            replica.finish()
            while !observed.isFinished, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(observed.isFinished)
            #expect(observed.failure == nil)
        }
    }
#endif
