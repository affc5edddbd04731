// The bytes the fan-out generator puts on the wire and the setup replies it reads back, for both
// servers it can drive: SnapSync (Protocol/PROTOCOL.md, version 1) and Redis (RESP 2 PUBLISH /
// SUBSCRIBE). Setup is blocking and may allocate; the measured loop only patches pre-built
// templates (FanoutGenerator) and scans replies in place.
//
// The load: one item, id "i", in one section "s", is overwritten with update_items(reload) on
// every publish, so the room's snapshot stays one item whatever the run length (append_items
// would grow the room without bound). The payload is [send time, CLOCK_MONOTONIC ns, u64 host
// order][sequence number, u64][filler 'x' up to the payload size].
#if canImport(Glibc)
    import Glibc

    enum FanoutTarget: String, CaseIterable {
        case snapsync
        case redis
    }

    /// Appends protocol fields (PROTOCOL.md §2) to a byte array. Setup only.
    struct FanoutFrameBuilder {
        var bytes: [UInt8] = []

        mutating func u8(_ value: UInt8) { bytes.append(value) }

        mutating func varint(_ value: UInt64) {
            var v = value
            while v >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
                v >>= 7
            }
            bytes.append(UInt8(v))
        }

        mutating func blob(_ value: [UInt8]) {
            varint(UInt64(value.count))
            bytes.append(contentsOf: value)
        }

        mutating func string(_ value: String) { blob(Array(value.utf8)) }

        /// Wraps `body` (type byte + fields) in the 4-byte big-endian length prefix (§1).
        static func frame(_ body: [UInt8]) -> [UInt8] {
            let length = UInt32(body.count)
            return [
                UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF),
                UInt8(length & 0xFF),
            ] + body
        }

        static func build(_ fill: (inout FanoutFrameBuilder) -> Void) -> [UInt8] {
            var builder = FanoutFrameBuilder()
            fill(&builder)
            return frame(builder.bytes)
        }
    }

    /// Writes the minimal LEB128 encoding of `value` at `p`; returns the number of bytes (1...10).
    @inline(__always)
    func fanoutPutVarint(_ value: UInt64, _ p: UnsafeMutablePointer<UInt8>) -> Int {
        var v = value
        var i = 0
        while v >= 0x80 {
            p[i] = UInt8(truncatingIfNeeded: v) | 0x80
            v >>= 7
            i += 1
        }
        p[i] = UInt8(truncatingIfNeeded: v)
        return i + 1
    }

    /// Reads a LEB128 varint at `p[i]`, advancing `i`; nil if it runs past `end` or past 10 bytes.
    @inline(__always)
    func fanoutGetVarint(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ end: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while i < end, shift < 70 {
            let byte = p[i]
            i += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
        return nil
    }

    /// SnapSync messages the benchmark sends and the setup replies it understands.
    enum FanoutSnapSync {
        static let hello: UInt8 = 0x01, welcome: UInt8 = 0x02, error: UInt8 = 0x03
        static let ping: UInt8 = 0x04, pong: UInt8 = 0x05
        static let join: UInt8 = 0x10, mutate: UInt8 = 0x12
        static let snapshot: UInt8 = 0x20, diff: UInt8 = 0x22, ack: UInt8 = 0x23, reject: UInt8 = 0x24
        static let opAppendSections: UInt8 = 0x01, opAppendItems: UInt8 = 0x10, opUpdateItems: UInt8 = 0x16

        static let sectionID: [UInt8] = Array("s".utf8)
        static let itemID: [UInt8] = Array("i".utf8)

        static func helloFrame(clientName: String = "snapsync-bench") -> [UInt8] {
            FanoutFrameBuilder.build { b in
                b.u8(hello)
                b.bytes.append(contentsOf: [0x53, 0x4E, 0x41, 0x50])  // "SNAP"
                b.varint(1); b.varint(1)  // versions: [1]
                b.string(clientName)
                b.blob([])  // no credentials
            }
        }

        static func joinFrame(requestID: UInt64, room: String) -> [UInt8] {
            FanoutFrameBuilder.build { b in
                b.u8(join); b.varint(requestID); b.string(room); b.u8(0)  // no resume position
            }
        }

        static func pongFrame(nonce: UInt64) -> [UInt8] {
            FanoutFrameBuilder.build { b in
                b.u8(pong); b.varint(nonce)
            }
        }

        /// MUTATE that creates the benchmark's layout: section "s" holding item "i".
        static func createLayoutFrame(requestID: UInt64, room: String, payload: [UInt8]) -> [UInt8] {
            FanoutFrameBuilder.build { b in
                b.u8(mutate); b.varint(requestID); b.string(room); b.u8(0); b.blob([])
                b.varint(2)
                b.u8(opAppendSections); b.varint(1); b.blob(sectionID); b.blob([])
                b.u8(opAppendItems); b.u8(1); b.blob(sectionID); b.varint(1); b.blob(itemID); b.blob(payload)
            }
        }

        /// The bytes of a publish MUTATE after its request id and up to (excluding) the payload bytes:
        /// room, no expected version, no write id, one update_items(reload) of item "i".
        static func publishMiddle(room: String, payloadBytes: Int) -> [UInt8] {
            var b = FanoutFrameBuilder()
            b.string(room); b.u8(0); b.blob([])
            b.varint(1); b.u8(opUpdateItems); b.u8(0); b.varint(1); b.blob(itemID)
            b.varint(UInt64(payloadBytes))
            return b.bytes
        }

        /// A whole MUTATE appending `items` (id, payload) to section "s".
        static func appendItemsFrame(requestID: UInt64, room: String, items: [([UInt8], [UInt8])]) -> [UInt8] {
            FanoutFrameBuilder.build { b in
                b.u8(mutate); b.varint(requestID); b.string(room); b.u8(0); b.blob([])
                b.varint(1)
                b.u8(opAppendItems); b.u8(1); b.blob(sectionID); b.varint(UInt64(items.count))
                for (id, payload) in items { b.blob(id); b.blob(payload) }
            }
        }

        static func appendSectionFrame(requestID: UInt64, room: String) -> [UInt8] {
            FanoutFrameBuilder.build { b in
                b.u8(mutate); b.varint(requestID); b.string(room); b.u8(0); b.blob([])
                b.varint(1); b.u8(opAppendSections); b.varint(1); b.blob(sectionID); b.blob([])
            }
        }

        /// "ERROR code: message" / "REJECT code: message" for a failure frame body, else nil.
        static func describeFailure(_ body: ArraySlice<UInt8>) -> String? {
            guard let type = body.first, type == error || type == reject else { return nil }
            let bytes = Array(body)
            return bytes.withUnsafeBufferPointer { buffer -> String in
                let p = buffer.baseAddress!
                var i = 1
                let end = buffer.count
                if type == reject { _ = fanoutGetVarint(p, &i, end) }  // request id
                let code = fanoutGetVarint(p, &i, end) ?? 0
                if type == reject {
                    if i < end, p[i] == 1 { i += 1; _ = fanoutGetVarint(p, &i, end) } else { i += 1 }  // op_index
                    if i < end, p[i] == 1 {  // identifier
                        i += 1
                        let n = Int(fanoutGetVarint(p, &i, end) ?? 0); i += n
                    } else {
                        i += 1
                    }
                }
                var message = ""
                if let n = fanoutGetVarint(p, &i, end), i + Int(n) <= end {
                    message = String(decoding: UnsafeBufferPointer(start: p + i, count: Int(n)), as: UTF8.self)
                }
                return "\(type == error ? "ERROR" : "REJECT") \(code): \(message)"
            }
        }

        /// WELCOME limits (key → value), PROTOCOL.md §3.
        static func welcomeLimits(_ body: ArraySlice<UInt8>) -> [UInt64: UInt64] {
            let bytes = Array(body)
            return bytes.withUnsafeBufferPointer { buffer in
                let p = buffer.baseAddress!
                let end = buffer.count
                var i = 1
                _ = fanoutGetVarint(p, &i, end)  // version
                _ = fanoutGetVarint(p, &i, end)  // session id
                let nameLength = Int(fanoutGetVarint(p, &i, end) ?? 0)
                i += nameLength
                var limits: [UInt64: UInt64] = [:]
                let count = fanoutGetVarint(p, &i, end) ?? 0
                for _ in 0..<count {
                    guard let key = fanoutGetVarint(p, &i, end), let value = fanoutGetVarint(p, &i, end) else { break }
                    limits[key] = value
                }
                return limits
            }
        }
    }

    /// Reads whole SnapSync frames from a blocking socket (setup only; the measured loop scans in place).
    struct FanoutFrameReader {
        let fd: Int32
        var buffer: [UInt8] = []
        var start = 0

        init(fd: Int32) { self.fd = fd }

        /// The next frame's body (type byte + fields), answering PINGs on the way. Exits on EOF.
        mutating func next(context: String) -> ArraySlice<UInt8> {
            while true {
                if buffer.count - start >= 4 {
                    let length =
                        Int(buffer[start]) << 24 | Int(buffer[start + 1]) << 16
                        | Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
                    if buffer.count - start >= 4 + length {
                        let body = buffer[(start + 4)..<(start + 4 + length)]
                        start += 4 + length
                        if start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
                        if body.first == FanoutSnapSync.ping {
                            let bytes = Array(body)
                            var i = 1
                            let nonce = bytes.withUnsafeBufferPointer { fanoutGetVarint($0.baseAddress!, &i, $0.count) } ?? 0
                            BenchSystem.writeAll(fd, FanoutSnapSync.pongFrame(nonce: nonce))
                            continue
                        }
                        return body
                    }
                }
                var chunk = [UInt8](repeating: 0, count: 65536)
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && errno == EAGAIN {
                    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    _ = poll(&p, 1, 1000)
                    continue
                }
                if n <= 0 {
                    fanoutErr("snapsync-bench: the server closed the connection during \(context)\n")
                    exit(1)
                }
                buffer.append(contentsOf: chunk[0..<n])
            }
        }

        /// Reads frames until one of type `type`; exits with the server's message on ERROR/REJECT.
        @discardableResult
        mutating func expect(_ type: UInt8, context: String) -> ArraySlice<UInt8> {
            while true {
                let body = next(context: context)
                if body.first == type { return body }
                if let failure = FanoutSnapSync.describeFailure(body) {
                    fanoutErr("snapsync-bench: \(context): the server answered \(failure)\n")
                    exit(1)
                }
                // Anything else (a DIFF from an earlier step, say) is not what setup waits for: skip it.
            }
        }
    }

    /// RESP 2 commands and replies for the Redis comparison.
    enum FanoutRedis {
        static func command(_ parts: [[UInt8]]) -> [UInt8] {
            var out = Array("*\(parts.count)\r\n".utf8)
            for part in parts {
                out += Array("$\(part.count)\r\n".utf8)
                out += part
                out += [13, 10]
            }
            return out
        }

        /// Everything of `PUBLISH channel <payload>` up to the payload bytes.
        static func publishPrefix(channel: String, payloadBytes: Int) -> [UInt8] {
            Array("*3\r\n$7\r\nPUBLISH\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(payloadBytes)\r\n".utf8)
        }

        /// Everything a subscriber receives for one message up to the payload bytes.
        static func messagePrefix(channel: String, payloadBytes: Int) -> [UInt8] {
            Array("*3\r\n$7\r\nmessage\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(payloadBytes)\r\n".utf8)
        }

        static func subscribeReply(channel: String) -> [UInt8] {
            Array("*3\r\n$9\r\nsubscribe\r\n$\(channel.utf8.count)\r\n\(channel)\r\n:1\r\n".utf8)
        }

        /// Reads exactly `expected.count` bytes and checks they are `expected` (setup only).
        static func readExactly(_ fd: Int32, _ expected: [UInt8], context: String) {
            var got = [UInt8](repeating: 0, count: expected.count)
            var have = 0
            while have < expected.count {
                let n = got.withUnsafeMutableBytes { read(fd, $0.baseAddress! + have, expected.count - have) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    fanoutErr("snapsync-bench: redis closed the connection during \(context)\n")
                    exit(1)
                }
                have += n
            }
            if got != expected {
                let text = String(decoding: got, as: UTF8.self)
                fanoutErr("snapsync-bench: unexpected reply from redis during \(context): \(text.debugDescription)\n")
                exit(1)
            }
        }
    }
#endif
