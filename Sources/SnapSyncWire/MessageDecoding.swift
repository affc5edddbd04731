import SnapSyncModel

// Body layouts of PROTOCOL.md §3–§5, read with `ByteReader`. Every list count is checked
// against the bytes left before anything is reserved, and the body must be used up exactly.
// Complexity: O(L) for a body of L bytes, plus O(n) hashing to build a snapshot's indexes.

extension ByteReader {
    /// Reads a whole body (after the type byte) as `message`'s layout.
    /// `limits` bounds server-sent content (DIFF ops, SNAPSHOT) and the snapshots of REPLACE;
    /// client-sent MUTATE ops are left to `RoomSnapshot.apply`, whose `BatchError` carries the
    /// op_index a REJECT needs.
    mutating func readBody(limits: WireLimits) throws(WireError) -> Message {
        let result: Message
        switch message {
        case .hello:
            guard remaining >= 4 else { throw truncated("magic") }
            guard bytes[offset] == 0x53, bytes[offset + 1] == 0x4E, bytes[offset + 2] == 0x41, bytes[offset + 3] == 0x50 else {
                throw WireError(.badMagic, "HELLO.magic is 0x\((0..<4).map { hex(bytes[offset + $0]) }.joined()), not \"SNAP\" (0x534e4150)")
            }
            offset += 4
            let count = try count("versions", minimumSize: 1)
            guard count > 0 else { throw fail("versions", "empty list (at least one version is required)") }
            var versions: [UInt64] = []
            versions.reserveCapacity(count)
            for _ in 0..<count { versions.append(try varint("versions")) }
            result = .hello(versions: versions, clientName: try string("client_name"), credentials: try bytesField("credentials"))
        case .welcome:
            let version = try varint("version")
            let sessionID = try varint("session_id")
            let serverName = try string("server_name")
            let count = try count("limits", minimumSize: 2)
            var limits: [Message.LimitEntry] = []
            limits.reserveCapacity(count)
            for _ in 0..<count {
                let key = try varint("limits.key")
                limits.append(Message.LimitEntry(key: key, value: try varint("limits.value")))
            }
            result = .welcome(version: version, sessionID: sessionID, serverName: serverName, limits: limits)
        case .error:
            let code = try varint("code")
            result = .error(code: code, message: try string("message"))
        case .ping:
            result = .ping(nonce: try varint("nonce"))
        case .pong:
            result = .pong(nonce: try varint("nonce"))
        case .join:
            let requestID = try varint("request_id")
            let room = try string("room")
            var resume: RoomPosition?
            var chain: RoomChain?
            if try flag("resume") {
                let epoch = try varint("resume.epoch")
                resume = RoomPosition(epoch: epoch, version: try varint("resume.version"))
                if ProtocolVersion.hasChain(version: self.version) { chain = try self.chain("resume.chain") }
            }
            result = .join(requestID: requestID, room: room, resume: resume, chain: chain)
        case .leave:
            let requestID = try varint("request_id")
            result = .leave(requestID: requestID, room: try string("room"))
        case .mutate:
            let requestID = try varint("request_id")
            let room = try string("room")
            let expected = try optionalVarint("expected_version")
            let writeID = try writeID()
            result = .mutate(
                requestID: requestID, room: room, expectedVersion: expected, writeID: writeID,
                ops: try operations(limits: nil))
        case .replace:
            let requestID = try varint("request_id")
            let room = try string("room")
            let expected = try optionalVarint("expected_version")
            let writeID = try writeID()
            result = .replace(
                requestID: requestID, room: room, expectedVersion: expected, writeID: writeID,
                snapshot: try snapshot(requestID: requestID, limits: limits))
        case .replaceSection:
            let requestID = try varint("request_id")
            let room = try string("room")
            let expected = try optionalVarint("expected_version")
            let writeID = try writeID()
            let section = SnapshotIdentifier(try bytesField("section"))
            result = .replaceSection(
                requestID: requestID, room: room, expectedVersion: expected, writeID: writeID, section: section,
                items: try sectionItems(requestID: requestID, limits: limits))
        case .stats:
            result = .stats(requestID: try varint("request_id"))
        case .auth:
            let requestID = try varint("request_id")
            result = .auth(requestID: requestID, credentials: try bytesField("credentials"))
        case .snapshot:
            let requestID = try varint("request_id")
            let room = try string("room")
            let epoch = try varint("epoch")
            let version = try varint("version")
            let reasonByte = try u8("reason")
            guard let reason = SnapshotReason(rawValue: reasonByte) else {
                throw fail("reason", "unknown reason \(reasonByte) (must be 0 initial or 1 resync)")
            }
            let digest = SnapshotDigest(bytes: try raw(SnapshotDigest.byteCount, "digest"))
            let chain = ProtocolVersion.hasChain(version: self.version) ? try chain("chain") : nil
            result = .snapshot(
                requestID: requestID, room: room, epoch: epoch, version: version, reason: reason,
                digest: digest, snapshot: try snapshot(requestID: requestID, limits: limits), chain: chain)
        case .catchup:
            let requestID = try varint("request_id")
            let room = try string("room")
            let epoch = try varint("epoch")
            let from = try varint("from_version")
            let to = try varint("to_version")
            var form: CatchupForm?
            if ProtocolVersion.hasChain(version: self.version) {
                form = try flag("folded") ? .folded(digest: SnapshotDigest(bytes: try raw(SnapshotDigest.byteCount, "folded"))) : .replay
            }
            result = .catchup(requestID: requestID, room: room, epoch: epoch, fromVersion: from, toVersion: to, form: form)
        case .diff:
            let room = try string("room")
            let epoch = try varint("epoch")
            let version = try varint("version")
            let ops = try operations(limits: limits.model)
            let chain = ProtocolVersion.hasChain(version: self.version) ? try chain("chain") : nil
            result = .diff(room: room, epoch: epoch, version: version, ops: ops, chain: chain)
        case .ack:
            let requestID = try varint("request_id")
            let epoch = try varint("epoch")
            result = .ack(requestID: requestID, epoch: epoch, version: try varint("version"))
        case .reject:
            let requestID = try varint("request_id")
            let code = try varint("code")
            let opIndex = try optionalVarint("op_index")
            var identifier: SnapshotIdentifier?
            if try flag("identifier") { identifier = SnapshotIdentifier(try bytesField("identifier")) }
            result = .reject(requestID: requestID, code: code, opIndex: opIndex, identifier: identifier, message: try string("message"))
        case .statsReply:
            let requestID = try varint("request_id")
            let count = try count("stats", minimumSize: 2)
            var stats: [Message.Stat] = []
            stats.reserveCapacity(count)
            for _ in 0..<count {
                let name = try string("stats.name")
                stats.append(Message.Stat(name: name, value: try varint("stats.value")))
            }
            result = .statsReply(requestID: requestID, stats: stats)
        case .left:
            let room = try string("room")
            let code = try varint("code")
            result = .left(room: room, code: code, message: try string("message"))
        case .drop:
            let requestID = try varint("request_id")
            result = .drop(requestID: requestID, room: try string("room"))
        case .setTTL:
            let requestID = try varint("request_id")
            let room = try string("room")
            result = .setTTL(requestID: requestID, room: room, seconds: try varint("seconds"))
        case .verify:
            let requestID = try varint("request_id")
            result = .verify(requestID: requestID, room: try string("room"))
        case .digest:
            let requestID = try varint("request_id")
            let room = try string("room")
            let epoch = try varint("epoch")
            let version = try varint("version")
            let digest = SnapshotDigest(bytes: try raw(SnapshotDigest.byteCount, "digest"))
            result = .digest(requestID: requestID, room: room, epoch: epoch, version: version, digest: digest, chain: try chain("chain"))
        case .presenceWatch:
            let requestID = try varint("request_id")
            let room = try string("room")
            let watch = try u8("watch")
            guard watch <= 1 else { throw fail("watch", "value \(watch) (must be 0 stop or 1 start)") }
            result = .presenceWatch(requestID: requestID, room: room, watch: watch == 1)
        case .presenceList:
            let requestID = try varint("request_id")
            let room = try string("room")
            let after = try varint("after")
            result = .presenceList(requestID: requestID, room: room, after: after, limit: try varint("limit"))
        case .setPresence:
            let requestID = try varint("request_id")
            let room = try string("room")
            result = .setPresence(requestID: requestID, room: room, state: try bytesField("state"))
        case .presence:
            let requestID = try varint("request_id")
            let room = try string("room")
            let count = try varint("count")
            // A member is at least 4 bytes: id, empty principal, joined_at, empty state.
            let listed = try self.count("members", minimumSize: 4)
            var members: [PresenceMember] = []
            members.reserveCapacity(listed)
            for _ in 0..<listed {
                let member = try presenceMember("members")
                if let last = members.last, member.memberID <= last.memberID {
                    throw fail("members", "member_id \(member.memberID) after \(last.memberID) (ids ascend strictly)")
                }
                members.append(member)
            }
            result = .presence(requestID: requestID, room: room, count: count, members: members, next: try varint("next"))
        case .presenceDiff:
            let room = try string("room")
            let count = try varint("count")
            // A change is at least 2 bytes: kind and an id (`hidden`).
            let listed = try self.count("changes", minimumSize: 2)
            var changes: [PresenceChange] = []
            changes.reserveCapacity(listed)
            var named = Set<UInt64>(minimumCapacity: listed)
            for _ in 0..<listed {
                let change = try presenceChange()
                guard named.insert(change.memberID).inserted else {
                    throw fail("changes", "member_id \(change.memberID) changed twice in one frame")
                }
                changes.append(change)
            }
            result = .presenceDiff(room: room, count: count, changes: changes)
        case .window:
            let requestID = try varint("request_id")
            let room = try string("room")
            result = .window(requestID: requestID, room: room, window: try window(limits: nil))
        case .windowState:
            let requestID = try varint("request_id")
            let room = try string("room")
            let epoch = try varint("epoch")
            let version = try varint("version")
            let chain = try chain("chain")
            let window = try window(limits: limits.model)
            let listed = try count("counts", minimumSize: 1)
            var counts: [UInt64] = []
            counts.reserveCapacity(listed)
            for _ in 0..<listed { counts.append(try varint("counts")) }
            let snapshot = try snapshot(requestID: requestID, limits: limits)
            guard counts.count == snapshot.numberOfSections else {
                throw fail("counts", "\(counts.count) counts for \(snapshot.numberOfSections) sections (one per section)")
            }
            result = .windowState(
                requestID: requestID, room: room, epoch: epoch, version: version, chain: chain, window: window, counts: counts,
                snapshot: snapshot)
        case .windowDiff:
            let requestID = try varint("request_id")
            let room = try string("room")
            let epoch = try varint("epoch")
            let version = try varint("version")
            let window = try flag("window") ? try self.window(limits: limits.model) : nil
            // A count is at least 2 bytes: an empty section id and a one-byte varint.
            let listed = try count("counts", minimumSize: 2)
            var counts: [SectionCount] = []
            counts.reserveCapacity(listed)
            for _ in 0..<listed {
                let section = try identifier("counts.section", limits: limits.model)
                counts.append(SectionCount(section: section, items: try varint("counts.items")))
            }
            let ops = try operations(limits: limits.model)
            result = .windowDiff(requestID: requestID, room: room, epoch: epoch, version: version, window: window, counts: counts, ops: ops)
        }
        guard isAtEnd else {
            throw WireError.malformed("\(remaining) trailing bytes after the last field of \(message.name)")
        }
        return result
    }

    mutating func presenceMember(_ field: StaticString) throws(WireError) -> PresenceMember {
        let id = try varint(field)
        guard id != 0 else { throw fail(field, "member_id 0 (ids are never 0)") }
        let principal = try string(field)
        let joinedAt = try varint(field)
        return PresenceMember(memberID: id, principal: principal, joinedAt: joinedAt, state: try bytesField(field))
    }

    mutating func presenceChange() throws(WireError) -> PresenceChange {
        let kind = try u8("changes.kind")
        switch kind {
        case 0: return .joined(try presenceMember("changes.member"))
        case 3: return .shown(try presenceMember("changes.member"))
        case 1, 2, 4:
            let id = try varint("changes.member_id")
            guard id != 0 else { throw fail("changes.member_id", "member_id 0 (ids are never 0)") }
            switch kind {
            case 1: return .left(memberID: id, reason: try u8("changes.reason"))
            case 2: return .state(memberID: id, state: try bytesField("changes.state"))
            default: return .hidden(memberID: id)
            }
        default:
            throw fail("changes.kind", "unknown kind \(kind) (0 joined, 1 left, 2 state, 3 shown, 4 hidden)")
        }
    }

    /// A `window` (§9, "Windows"): a list of section windows. Sizes and duplicates are the
    /// server's to refuse (REJECT), not malformed frames.
    mutating func window(limits: SnapshotLimits?) throws(WireError) -> [SectionWindow] {
        // A section window is at least 3 bytes: an empty section id, the kind and a varint.
        let listed = try count("window", minimumSize: 3)
        var window: [SectionWindow] = []
        window.reserveCapacity(listed)
        for _ in 0..<listed {
            let section = try identifier("window.section", limits: limits)
            let kind = try u8("window.kind")
            switch SectionWindowKind(rawValue: kind) {
            case .first?: window.append(SectionWindow(section: section, range: .first(try varint("window.count"))))
            case .last?: window.append(SectionWindow(section: section, range: .last(try varint("window.count"))))
            case .around?:
                let anchor = try identifier("window.anchor", limits: limits)
                let before = try varint("window.before")
                let range = SectionWindow.Range.around(anchor: anchor, before: before, after: try varint("window.after"))
                window.append(SectionWindow(section: section, range: range))
            case nil: throw fail("window.kind", "unknown kind \(kind) (0 first, 1 last, 2 around)")
            }
        }
        return window
    }

    mutating func optionalVarint(_ field: StaticString) throws(WireError) -> UInt64? {
        guard try flag(field) else { return nil }
        return try varint(field)
    }

    mutating func writeID() throws(WireError) -> [UInt8] {
        let n = try length("write_id")
        guard n <= 32 else { throw fail("write_id", "write_id of \(n) bytes (at most 32)") }
        return try raw(n, "write_id")
    }

    // MARK: Content

    /// An identifier; with `limits`, one longer than `maxIdentifierBytes` is refused before it
    /// is copied.
    mutating func identifier(_ field: StaticString, limits: SnapshotLimits?) throws(WireError) -> SnapshotIdentifier {
        let n = try length(field)
        if let limits, n > limits.maxIdentifierBytes {
            // Copy only for the error's sake, bounded by the frame (already in memory).
            let id = SnapshotIdentifier(try raw(n, field))
            throw WireError(.identifierTooLong, "\(message.name).\(field) \(id) is \(n) bytes, over the limit of \(limits.maxIdentifierBytes)", identifier: id)
        }
        return SnapshotIdentifier(try raw(n, field))
    }

    mutating func element(_ field: StaticString, limits: SnapshotLimits?) throws(WireError) -> SnapshotElement {
        let id = try identifier(field, limits: limits)
        let n = try length(field)
        if let limits, n > limits.maxPayloadBytes {
            throw WireError(
                .payloadTooLarge, "\(message.name).\(field) payload of \(id) is \(n) bytes, over the limit of \(limits.maxPayloadBytes)", identifier: id)
        }
        return SnapshotElement(id, payload: SnapshotPayload(try raw(n, field)))
    }

    mutating func elements(_ field: StaticString, limits: SnapshotLimits?) throws(WireError) -> [SnapshotElement] {
        let count = try count(field, minimumSize: 2)
        var result: [SnapshotElement] = []
        result.reserveCapacity(count)
        for _ in 0..<count { result.append(try element(field, limits: limits)) }
        return result
    }

    mutating func identifiers(_ field: StaticString, limits: SnapshotLimits?) throws(WireError) -> [SnapshotIdentifier] {
        let count = try count(field, minimumSize: 1)
        var result: [SnapshotIdentifier] = []
        result.reserveCapacity(count)
        for _ in 0..<count { result.append(try identifier(field, limits: limits)) }
        return result
    }

    mutating func placement(limits: SnapshotLimits?) throws(WireError) -> SnapshotOperation.Placement {
        let side = try u8("placement.side")
        switch side {
        case 0x00: return .before(try identifier("placement.anchor", limits: limits))
        case 0x01: return .after(try identifier("placement.anchor", limits: limits))
        default: throw fail("placement.side", "unknown side 0x\(hex(side)) (must be 0x00 before or 0x01 after)")
        }
    }

    mutating func operations(limits: SnapshotLimits?) throws(WireError) -> [SnapshotOperation] {
        let count = try count("ops", minimumSize: 1)
        var ops: [SnapshotOperation] = []
        ops.reserveCapacity(count)
        for _ in 0..<count { ops.append(try operation(limits: limits)) }
        return ops
    }

    mutating func operation(limits: SnapshotLimits?) throws(WireError) -> SnapshotOperation {
        let code = try u8("ops.opcode")
        guard let opcode = Opcode(rawValue: code), opcode.exists(inVersion: version) else {
            throw fail("ops.opcode", "unknown opcode 0x\(hex(code))\(Opcode(rawValue: code) == nil ? "" : " in protocol version \(version)")")
        }
        switch opcode {
        case .appendSections:
            return .appendSections(try elements("ops.elements", limits: limits))
        case .insertSections:
            let placement = try placement(limits: limits)
            return .insertSections(try elements("ops.elements", limits: limits), placement)
        case .deleteSections:
            return .deleteSections(try identifiers("ops.ids", limits: limits))
        case .moveSection:
            let id = try identifier("ops.id", limits: limits)
            return .moveSection(id, try placement(limits: limits))
        case .updateSections:
            return .updateSections(try elements("ops.elements", limits: limits))
        case .appendItems:
            var section: SnapshotIdentifier?
            if try flag("ops.section") { section = try identifier("ops.section", limits: limits) }
            return .appendItems(try elements("ops.elements", limits: limits), toSection: section)
        case .insertItems:
            let placement = try placement(limits: limits)
            return .insertItems(try elements("ops.elements", limits: limits), placement)
        case .deleteItems:
            return .deleteItems(try identifiers("ops.ids", limits: limits))
        case .deleteAllItems:
            return .deleteAllItems
        case .moveItem:
            let id = try identifier("ops.id", limits: limits)
            return .moveItem(id, try placement(limits: limits))
        case .moveItemToSection:
            let id = try identifier("ops.id", limits: limits)
            return .moveItemToSection(id, section: try identifier("ops.section", limits: limits))
        case .updateItems:
            let kindByte = try u8("ops.kind")
            guard let kind = SnapshotOperation.UpdateKind(rawValue: kindByte) else {
                throw fail("ops.kind", "unknown update kind 0x\(hex(kindByte)) (must be 0x00 reload or 0x01 reconfigure)")
            }
            return .updateItems(try elements("ops.elements", limits: limits), kind)
        case .appendChildren:
            let parent = try identifier("ops.parent", limits: limits)
            return .appendChildren(try elements("ops.elements", limits: limits), toParent: parent)
        case .moveItemToParent:
            let id = try identifier("ops.id", limits: limits)
            return .moveItemToParent(id, parent: try identifier("ops.parent", limits: limits))
        }
    }

    /// A `snapshot` field (§4). The whole structure is read first, so a malformed frame is
    /// reported as such; then its size is checked, then the snapshot is built with `limits` in
    /// document order (each section, then its items), so that the first broken content rule
    /// (duplicate identifier, a limit) is the one §4 names, reported with its own code and
    /// `requestID`.
    mutating func snapshot(requestID: UInt64, limits: WireLimits) throws(WireError) -> RoomSnapshot {
        let start = offset
        let (sections, levels) = try snapshotStructure()
        // One `appendSections` per section followed by its items' `appendItems` (absent section:
        // the one just appended, which is the last), so the model checks in document order.
        var ops: [SnapshotOperation] = []
        ops.reserveCapacity(2 * sections.count)
        var itemIDs: [SnapshotIdentifier] = []
        for (section, items) in sections {
            ops.append(.appendSections([section]))
            if !items.isEmpty { ops.append(.appendItems(items, toSection: nil)) }
            for item in items { itemIDs.append(item.id) }
        }
        let size = offset - start
        guard size <= limits.model.maxSnapshotBytes else {
            throw WireError(
                .snapshotTooLarge, "\(message.name).snapshot is \(size) bytes, over the limit of \(limits.model.maxSnapshotBytes)", requestID: requestID)
        }
        var snapshot = RoomSnapshot()
        do {
            try snapshot.apply(ops, limits: limits.model)
        } catch {
            throw WireError(
                ErrorCode(error.violation), "\(message.name).snapshot: \(error.violation)",
                requestID: requestID, identifier: error.violation.identifier)
        }
        if let levels {
            try checkDepth(levels, itemIDs: itemIDs, requestID: requestID, limits: limits.model)
            do {
                try snapshot.setOutlineLevels(levels, maxOutlineDepth: limits.model.maxOutlineDepth)
            } catch {
                preconditionFailure("levels checked by levelsPart and checkDepth: \(error)")
            }
        }
        return snapshot
    }

    /// The structure of a `snapshot` field (§4), read to the end of the body: its sections with
    /// their items, and its `levels` part (nil when flat), with every structural rule checked
    /// (`malformed_frame`) and none of the content rules (limits, duplicates), which the caller
    /// applies. The one reading of the canonical encoding: the wire's snapshot fields and the
    /// store's checkpoints (`CanonicalSnapshot`) both go through it.
    /// - Complexity: O(bytes); nothing is reserved beyond what the bytes left can hold.
    mutating func snapshotStructure() throws(WireError) -> (
        sections: [(section: SnapshotElement, items: [SnapshotElement])], levels: [Int]?
    ) {
        let sectionCount = try count("snapshot.sections", minimumSize: 3)
        var sections: [(section: SnapshotElement, items: [SnapshotElement])] = []
        sections.reserveCapacity(sectionCount)
        var sectionSizes: [Int] = []
        sectionSizes.reserveCapacity(sectionCount)
        var itemCount = 0
        for _ in 0..<sectionCount {
            let section = try element("snapshot.section", limits: nil)
            let items = try elements("snapshot.items", limits: nil)
            sections.append((section, items))
            sectionSizes.append(items.count)
            itemCount += items.count
        }
        let levels = try levelsPart(sectionSizes: sectionSizes, itemCount: itemCount, field: "snapshot.levels")
        return (sections, levels)
    }

    /// REPLACE_SECTION's `items` (§4 `section_items`, §11.21): the structure, then the field's
    /// size, then each item's rules in order, then the depth.
    mutating func sectionItems(requestID: UInt64, limits: WireLimits) throws(WireError) -> SectionSnapshot {
        let start = offset
        let items = try elements("items", limits: nil)
        let levels = try levelsPart(sectionSizes: [items.count], itemCount: items.count, field: "items.levels")
        let size = offset - start
        guard size <= limits.model.maxSnapshotBytes else {
            throw WireError(
                .snapshotTooLarge, "\(message.name).items is \(size) bytes, over the limit of \(limits.model.maxSnapshotBytes)", requestID: requestID)
        }
        // The room-wide size is checked when the section is applied (§10, step 6).
        var itemLimits = limits.model
        itemLimits.maxSnapshotBytes = .max
        var result: SectionSnapshot
        do {
            result = try SectionSnapshot(items, limits: itemLimits)
        } catch {
            throw WireError(
                ErrorCode(error.violation), "\(message.name).items: \(error.violation)",
                requestID: requestID, identifier: error.violation.identifier)
        }
        if let levels {
            try checkDepth(levels, itemIDs: items.map(\.id), requestID: requestID, limits: limits.model)
            do {
                try result.setOutlineLevels(levels, maxOutlineDepth: limits.model.maxOutlineDepth)
            } catch {
                preconditionFailure("levels checked by levelsPart and checkDepth: \(error)")
            }
        }
        return result
    }

    /// The `levels` part after the items of a snapshot field (§4): every byte left in the body,
    /// `nil` when none is (or on a version 1 connection, which has no levels part: what is left
    /// is then trailing bytes). Structural rules only, each `malformed_frame`: one varint per
    /// item, each section starting at level 0, no step up of more than one, not all 0.
    /// Nothing is reserved before the bytes left are known to hold one varint per item.
    /// - Complexity: O(items)
    mutating func levelsPart(sectionSizes: [Int], itemCount: Int, field: StaticString) throws(WireError) -> [Int]? {
        guard ProtocolVersion.hasOutlines(version), !isAtEnd else { return nil }
        guard remaining >= itemCount else {
            throw fail(field, "\(remaining) bytes left for the levels of \(itemCount) items")
        }
        var levels: [Int] = []
        levels.reserveCapacity(itemCount)
        var deepest: UInt64 = 0
        for size in sectionSizes {
            var previous: UInt64? = nil
            for _ in 0..<size {
                let level = try varint(field)
                guard level <= (previous.map { $0 + 1 } ?? 0) else {
                    throw fail(field, "level \(level) after \(previous.map { "level \($0)" } ?? "the start of a section") (at most one deeper)")
                }
                previous = level
                deepest = max(deepest, level)
                levels.append(Int(level))
            }
        }
        guard isAtEnd else { throw fail(field, "\(remaining) bytes after one level per item") }
        guard deepest > 0 else { throw fail(field, "every level is 0 (a flat snapshot has no levels part)") }
        return levels
    }

    /// `outline_too_deep` for the first item whose level is `maxOutlineDepth` or more (§4 rule 3).
    func checkDepth(_ levels: [Int], itemIDs: [SnapshotIdentifier], requestID: UInt64, limits: SnapshotLimits) throws(WireError) {
        guard let k = levels.firstIndex(where: { $0 >= limits.maxOutlineDepth }) else { return }
        throw WireError(
            .outlineTooDeep, "\(message.name): item \(itemIDs[k]) is at level \(levels[k]), over the outline limit of \(limits.maxOutlineDepth) levels",
            requestID: requestID, identifier: itemIDs[k])
    }
}
