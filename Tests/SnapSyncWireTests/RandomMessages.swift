import SnapSyncTestSupport
import SnapSyncModel
import SnapSyncWire

/// Random messages covering every case, with values at varint boundaries, empty and binary
/// byte strings and non-ASCII text.
struct MessageFactory {
    var rng: SplitMix64
    /// The protocol version whose layouts the messages take: from 3 on, SNAPSHOT and DIFF carry
    /// a chain, and VERIFY and DIGEST exist.
    var version: UInt64 = ProtocolVersion.unchained

    mutating func chain() -> RoomChain? {
        guard ProtocolVersion.hasChain(version: version) else { return nil }
        return RoomChain(bytes: (0..<RoomChain.byteCount).map { _ in UInt8.random(in: 0...255, using: &rng) })!
    }

    mutating func uint() -> UInt64 {
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: return 0
        case 1: return UInt64.random(in: 0...127, using: &rng)
        case 2: return UInt64.random(in: 128...16_383, using: &rng)
        case 3: return UInt64.max - UInt64.random(in: 0...3, using: &rng)
        case 4: return 1 << UInt64.random(in: 0...63, using: &rng)
        default: return rng.next()
        }
    }

    mutating func bytes(max: Int = 12) -> [UInt8] {
        let n = Int.random(in: 0...max, using: &rng)
        if Bool.random(using: &rng) {
            return (0..<n).map { _ in UInt8.random(in: 0x61...0x7A, using: &rng) }
        }
        return (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    mutating func text() -> String {
        let pieces = ["a", "room", "é", "채팅", "🙂", " ", "\u{0}", "z"]
        return (0..<Int.random(in: 0...4, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
    }

    mutating func id() -> SnapshotIdentifier { SnapshotIdentifier(bytes(max: 6)) }
    mutating func element() -> SnapshotElement { SnapshotElement(id(), payload: SnapshotPayload(bytes())) }
    mutating func elements() -> [SnapshotElement] { (0..<Int.random(in: 0...3, using: &rng)).map { _ in element() } }
    mutating func ids() -> [SnapshotIdentifier] { (0..<Int.random(in: 0...3, using: &rng)).map { _ in id() } }
    mutating func placement() -> SnapshotOperation.Placement { Bool.random(using: &rng) ? .before(id()) : .after(id()) }
    mutating func optional<T>(_ make: (inout MessageFactory) -> T) -> T? {
        Bool.random(using: &rng) ? make(&self) : nil
    }

    mutating func operation() -> SnapshotOperation {
        switch Int.random(in: 0..<14, using: &rng) {
        case 0: return .appendSections(elements())
        case 1: return .insertSections(elements(), placement())
        case 2: return .deleteSections(ids())
        case 3: return .moveSection(id(), placement())
        case 4: return .updateSections(elements())
        case 5: return .appendItems(elements(), toSection: optional { $0.id() })
        case 6: return .insertItems(elements(), placement())
        case 7: return .deleteItems(ids())
        case 8: return .deleteAllItems
        case 9: return .moveItem(id(), placement())
        case 10: return .moveItemToSection(id(), section: id())
        case 11: return .appendChildren(elements(), toParent: id())
        case 12: return .moveItemToParent(id(), parent: id())
        default: return .updateItems(elements(), Bool.random(using: &rng) ? .reload : .reconfigure)
        }
    }

    mutating func ops() -> [SnapshotOperation] { (0..<Int.random(in: 0...5, using: &rng)).map { _ in operation() } }

    /// A valid snapshot: unique section and item identifiers (made unique by a counter prefix),
    /// the first of each kind empty now and then (the empty identifier is an identifier, §2).
    mutating func snapshot() -> RoomSnapshot {
        var snapshot = RoomSnapshot()
        var counter: UInt8 = 0
        var emptySection = Bool.random(using: &rng), emptyItem = Bool.random(using: &rng)
        for _ in 0..<Int.random(in: 0...3, using: &rng) {
            counter += 1
            let sectionID = emptySection ? SnapshotIdentifier([]) : SnapshotIdentifier([counter] + bytes(max: 4))
            emptySection = false
            let section = SnapshotElement(sectionID, payload: SnapshotPayload(bytes()))
            let items = (0..<Int.random(in: 0...3, using: &rng)).map { _ -> SnapshotElement in
                counter += 1
                let itemID = emptyItem ? SnapshotIdentifier([]) : SnapshotIdentifier([counter] + bytes(max: 4))
                emptyItem = false
                return SnapshotElement(itemID, payload: SnapshotPayload(bytes()))
            }
            try! snapshot.apply([.appendSections([section]), .appendItems(items, toSection: section.id)])
        }
        // An outline now and then (§4): each section's levels start at 0 and go at most one deeper.
        if Bool.random(using: &rng) {
            var levels: [Int] = []
            for section in snapshot.sectionIdentifiers {
                var previous = -1
                for _ in 0..<snapshot.numberOfItems(inSection: section)! {
                    previous = Int.random(in: 0...previous + 1, using: &rng)
                    levels.append(previous)
                }
            }
            try! snapshot.setOutlineLevels(levels, maxOutlineDepth: .max)
        }
        return snapshot
    }

    /// REPLACE_SECTION's items: unique identifiers, levels as a section's.
    mutating func sectionItems() -> SectionSnapshot {
        var counter: UInt8 = 0
        let items = (0..<Int.random(in: 0...4, using: &rng)).map { _ -> SnapshotElement in
            counter += 1
            return SnapshotElement(SnapshotIdentifier([counter] + bytes(max: 4)), payload: SnapshotPayload(bytes()))
        }
        var result = try! SectionSnapshot(items)
        var previous = -1
        let levels = items.map { _ -> Int in
            previous = Int.random(in: 0...previous + 1, using: &rng)
            return previous
        }
        try! result.setOutlineLevels(levels, maxOutlineDepth: .max)
        return result
    }

    mutating func message() -> Message {
        switch Int.random(in: 0..<(ProtocolVersion.hasChain(version: version) ? 23 : 21), using: &rng) {
        case 0: return .hello(versions: (0..<Int.random(in: 1...3, using: &rng)).map { _ in uint() }, clientName: text(), credentials: bytes())
        case 1:
            return .welcome(
                version: uint(), sessionID: uint(), serverName: text(),
                limits: (0..<Int.random(in: 0...9, using: &rng)).map { _ in Message.LimitEntry(key: uint(), value: uint()) })
        case 2: return .error(code: uint(), message: text())
        case 3: return .ping(nonce: uint())
        case 4: return .pong(nonce: uint())
        case 5:
            let resume = optional { RoomPosition(epoch: $0.uint(), version: $0.uint()) }
            return .join(requestID: uint(), room: text(), resume: resume, chain: resume == nil ? nil : chain())
        case 6: return .leave(requestID: uint(), room: text())
        case 7: return .mutate(requestID: uint(), room: text(), expectedVersion: optional { $0.uint() }, writeID: bytes(max: 32), ops: ops())
        case 8: return .replace(requestID: uint(), room: text(), expectedVersion: optional { $0.uint() }, writeID: bytes(max: 32), snapshot: snapshot())
        case 9: return .stats(requestID: uint())
        case 10:
            let snap = snapshot()
            return .snapshot(
                requestID: uint(), room: text(), epoch: uint(), version: uint(),
                reason: Bool.random(using: &rng) ? .initial : .resync, digest: snap.digest, snapshot: snap, chain: chain())
        case 11:
            var form: CatchupForm?
            if ProtocolVersion.hasChain(version: version) {
                form = Bool.random(using: &rng) ? .replay : .folded(digest: snapshot().digest)
            }
            return .catchup(requestID: uint(), room: text(), epoch: uint(), fromVersion: uint(), toVersion: uint(), form: form)
        case 12: return .diff(room: text(), epoch: uint(), version: uint(), ops: ops(), chain: chain())
        case 13: return .ack(requestID: uint(), epoch: uint(), version: uint())
        case 14: return .reject(requestID: uint(), code: uint(), opIndex: optional { $0.uint() }, identifier: optional { $0.id() }, message: text())
        case 15: return .auth(requestID: uint(), credentials: bytes(max: 300))
        case 16: return .left(room: text(), code: uint(), message: text())
        case 17: return .drop(requestID: uint(), room: text())
        case 18: return .setTTL(requestID: uint(), room: text(), seconds: uint())
        case 19:
            return .replaceSection(
                requestID: uint(), room: text(), expectedVersion: optional { $0.uint() }, writeID: bytes(max: 32), section: id(),
                items: sectionItems())
        case 21: return .verify(requestID: uint(), room: text())
        case 22:
            return .digest(
                requestID: uint(), room: text(), epoch: uint(), version: uint(), digest: snapshot().digest, chain: chain()!)
        default: return .statsReply(requestID: uint(), stats: (0..<Int.random(in: 0...4, using: &rng)).map { _ in Message.Stat(name: text(), value: uint()) })
        }
    }
}
