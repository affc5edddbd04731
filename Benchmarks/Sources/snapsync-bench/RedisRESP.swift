// RESP 2, as much of it as the Redis comparisons need: commands out, and the few replies they
// expect matched byte for byte (SUBSCRIBE's confirmation, "message" pushes of a known size,
// ":N" and "+OK" lines). Hand-written: the package lists this project may use hold no
// maintained Swift Redis client, and a full one would be more code than this.
#if canImport(Glibc)
    import Glibc

    enum RESP {
        /// An array of bulk strings: `*N`, then `$len` and the bytes of each part.
        static func command(_ parts: [[UInt8]]) -> [UInt8] {
            var out = Array("*\(parts.count)\r\n".utf8)
            for part in parts {
                out += Array("$\(part.count)\r\n".utf8)
                out += part
                out += [13, 10]
            }
            return out
        }

        /// `PUBLISH channel <payload>` up to the payload bytes.
        static func publishPrefix(channel: String, payloadBytes: Int) -> [UInt8] {
            Array("*3\r\n$7\r\nPUBLISH\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(payloadBytes)\r\n".utf8)
        }

        /// What a subscriber receives for one message, up to the payload bytes.
        static func messagePrefix(channel: String, payloadBytes: Int) -> [UInt8] {
            Array("*3\r\n$7\r\nmessage\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(payloadBytes)\r\n".utf8)
        }

        /// Redis's confirmation of the connection's first SUBSCRIBE.
        static func subscribeReply(channel: String) -> [UInt8] {
            Array("*3\r\n$9\r\nsubscribe\r\n$\(channel.utf8.count)\r\n\(channel)\r\n:1\r\n".utf8)
        }

        /// Reads exactly `expected.count` bytes and checks they are `expected` (setup only).
        static func readExactly(_ fd: Int32, _ expected: [UInt8], server: String = "redis", context: String) {
            var got = [UInt8](repeating: 0, count: expected.count)
            var have = 0
            while have < expected.count {
                let n = got.withUnsafeMutableBytes { BenchTLS.read(fd, $0.baseAddress! + have, expected.count - have) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { BenchSystem.die("\(server) closed the connection during \(context)") }
                have += n
            }
            if got != expected {
                BenchSystem.die("unexpected reply from \(server) during \(context): \(String(decoding: got, as: UTF8.self).debugDescription)")
            }
        }
    }
#endif
