import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// Every vector in Protocol/vectors, against the Swift codec.
@Suite(.unitTests) struct VectorTests {
    @Test func vectorsArePresent() {
        #expect(Vectors.all.count > 100)
        #expect(Vectors.valid.count > 50)
        // Every message type and every op kind appears in a valid vector.
        let types = Set(Vectors.valid.compactMap { $0.message?["type"]?.string })
        #expect(types == Set(MessageType.allCases.map(\.name)))
        let ops = Set(Vectors.valid.flatMap { ($0.message?["ops"]?.array ?? []).compactMap { $0["op"]?.string } })
        #expect(ops.count == 14)
    }

    @Test(arguments: Vectors.all)
    func decodeWholeFrame(_ v: Vectors.Case) throws {
        if v.valid {
            let message = try FrameDecoder.decode(frame: v.bytes, limits: v.limits, version: v.version)
            #expect(JSONForm.vectorMessage(message) == v.message, "\(v)")
            // Exactly one encoding per message.
            #expect(FrameEncoder().encode(message) == v.bytes, "\(v)")
            // The generator's SHA-256 agrees with the model's digest.
            if case .snapshot(_, _, _, _, _, let digest, let snapshot, _) = message {
                #expect(snapshot.digest == digest, "\(v)")
            }
        } else {
            #expect(throws: WireError.self, "\(v)") { try FrameDecoder.decode(frame: v.bytes, limits: v.limits, version: v.version) }
            do {
                _ = try FrameDecoder.decode(frame: v.bytes, limits: v.limits, version: v.version)
            } catch {
                #expect(error.code.name == v.error, "\(v): \(error)")
                if let expected = v.identifier {
                    #expect(error.identifier.map { JSONForm.bytes($0.bytes) } ?? .null == expected, "\(v): \(error)")
                }
            }
        }
    }

    /// chain.json's histories: `RoomChain.start` gives each `start`, and `next(frame:)` each
    /// chain after a DIFF frame; each frame decodes as version 2 to the version it names.
    @Test func chainHistories() throws {
        #expect(!Vectors.chains.isEmpty)
        for history in Vectors.chains {
            var chain = RoomChain.start(epoch: history.epoch)
            #expect(chain.bytes == history.start)
            for (index, step) in history.steps.enumerated() {
                guard case .diff(_, let epoch, let version, _, nil) = try FrameDecoder.decode(frame: step.frame) else {
                    Issue.record("step \(index) is not a version 2 DIFF")
                    return
                }
                #expect(epoch == history.epoch && version == UInt64(index + 1))
                chain = chain.next(frame: step.frame)
                #expect(chain.bytes == step.chain, "after version \(version)")
            }
        }
    }

    /// The v3 CATCHUP vectors (PROTOCOL.md §11.12) decode to both forms: `folded` null (replay)
    /// and present, and a version 2 CATCHUP has no such field.
    @Test func catchupFormsArePresent() throws {
        var replay = 0
        var folded = 0
        for v in Vectors.valid where v.message?["type"]?.string == "CATCHUP" {
            let message = try FrameDecoder.decode(frame: v.bytes, limits: v.limits, version: v.version)
            guard case .catchup(_, _, _, _, _, let form) = message else { continue }
            switch form {
            case nil: #expect(v.version < 3 && v.message?["folded"] == nil, "\(v)")
            case .replay?:
                replay += 1
                #expect(v.message?["folded"] == .null, "\(v)")
            case .folded(let digest)?:
                folded += 1
                #expect(v.message?["folded"].map { JSONForm.byteString(from: $0) } == digest.bytes, "\(v)")
            }
        }
        #expect(replay >= 2 && folded >= 2)
    }

    /// PROTOCOL.md §16: version 2 reads every version 1 vector as version 1 does, but for the
    /// one whose bytes it gives a meaning (type 0x18, a REPLACE_SECTION cut short).
    @Test func versionOneVectorsReadTheSameInVersionTwo() {
        var changed: [String] = []
        for v in Vectors.all where v.version == 1 && !v.flags.contains("Version1") {
            func outcome(_ version: UInt64) -> String {
                do {
                    return "\(JSONForm.message(try FrameDecoder.decode(frame: v.bytes, limits: v.limits, version: version)))"
                } catch {
                    return error.code.name
                }
            }
            if outcome(1) != outcome(2) {
                changed.append(v.comment)
                #expect(outcome(2) == "malformed_frame", "\(v)")
            }
        }
        #expect(changed == ["unknown message type 0x18"])
    }

    /// The incremental decoder: a valid frame decodes; a truncated one is "need more" and
    /// consumes nothing; a bad length prefix fails from the 4 length bytes alone.
    @Test(arguments: Vectors.all)
    func decodeIncrementally(_ v: Vectors.Case) throws {
        var decoder = FrameDecoder(limits: v.limits)
        decoder.version = v.version
        decoder.append(v.bytes)
        if v.valid {
            let message = try decoder.nextMessage()
            #expect(message.map(JSONForm.vectorMessage) == v.message, "\(v)")
            #expect(decoder.bufferedByteCount == 0)
            #expect(try decoder.nextMessage() == nil)
        } else if v.flags.contains("Truncated") {
            #expect(try decoder.nextMessage() == nil, "\(v)")
            #expect(decoder.bufferedByteCount == v.bytes.count, "consumed nothing: \(v)")
        } else {
            do {
                let m = try decoder.nextMessage()
                Issue.record("\(v) decoded as \(String(describing: m))")
            } catch {
                #expect(error.code.name == v.error, "\(v): \(error)")
            }
            if v.flags.contains("FrameLength") {
                // Nothing consumed, and the error repeats: the stream cannot be resynchronised.
                #expect(decoder.bufferedByteCount == v.bytes.count)
                #expect(throws: WireError.self) { try decoder.nextMessage() }
                var prefixOnly = FrameDecoder(limits: v.limits)
                prefixOnly.version = v.version
                prefixOnly.append(v.bytes.prefix(4))
                #expect(throws: WireError.self) { try prefixOnly.nextMessage() }
            } else {
                // A whole frame was there: it is consumed.
                #expect(decoder.bufferedByteCount == 0, "\(v)")
            }
        }
    }

    /// Each valid vector fed one byte at a time: nil until the last byte, nothing consumed.
    @Test func byteByByte() throws {
        for v in Vectors.valid {
            var decoder = FrameDecoder(limits: v.limits)
            decoder.version = v.version
            for (index, byte) in v.bytes.enumerated() {
                decoder.append(CollectionOfOne(byte))
                if index < v.bytes.count - 1 {
                    #expect(try decoder.nextMessage() == nil, "\(v) at byte \(index)")
                    #expect(decoder.bufferedByteCount == index + 1)
                }
            }
            let message = try #require(try decoder.nextMessage(), "\(v)")
            #expect(JSONForm.vectorMessage(message) == v.message, "\(v)")
        }
    }

    /// Every prefix of every valid vector is "need more" and consumes nothing.
    @Test func truncatedAtEveryLength() throws {
        for v in Vectors.valid {
            for length in 0..<v.bytes.count {
                var decoder = FrameDecoder(limits: v.limits)
                decoder.version = v.version
                decoder.append(v.bytes[..<length])
                #expect(try decoder.nextMessage() == nil, "\(v) cut at \(length)")
                #expect(decoder.bufferedByteCount == length)
                #expect(throws: WireError.self) { try FrameDecoder.decode(frame: Array(v.bytes[..<length]), limits: v.limits, version: v.version) }
            }
        }
    }

    /// All valid vectors of a file in one buffer, and in chunks of awkward sizes.
    @Test(arguments: Vectors.files, [1 << 20, 7, 1000])
    func concatenated(file: String, chunk: Int) throws {
        let cases = Vectors.load(file).filter(\.valid)
        let stream = cases.flatMap(\.bytes)
        var decoder = FrameDecoder(limits: cases[0].limits)
        decoder.version = cases[0].version
        var decoded: [Message] = []
        var offset = 0
        while offset < stream.count {
            let end = min(offset + chunk, stream.count)
            decoder.append(stream[offset..<end])
            offset = end
            while let m = try decoder.nextMessage() { decoded.append(m) }
        }
        #expect(decoded.count == cases.count)
        #expect(decoder.bufferedByteCount == 0)
        for (m, v) in zip(decoded, cases) {
            #expect(JSONForm.vectorMessage(m) == v.message, "\(v)")
        }
        // Encoding them all into one reused buffer gives the same stream back.
        var buffer: [UInt8] = []
        let encoder = FrameEncoder()
        for m in decoded { encoder.encode(m, into: &buffer) }
        #expect(buffer == stream)
    }
}

extension JSONForm {
    /// `message(_:)` with, for a version 3 CATCHUP, its `folded` member (PROTOCOL.md §14:
    /// `null` in the replay form, the digest's byte string in the folded form) when `message(_:)`
    /// does not write one yet.
    static func vectorMessage(_ message: Message) -> JSON {
        let json = Self.message(message)
        guard case .catchup(_, _, _, _, _, let form?) = message, case .object(var fields) = json, fields["folded"] == nil else {
            return json
        }
        switch form {
        case .replay: fields["folded"] = .null
        case .folded(let digest): fields["folded"] = bytes(digest.bytes)
        }
        return .object(fields)
    }
}
