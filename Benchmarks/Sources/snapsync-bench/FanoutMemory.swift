// `snapsync-bench memory`: the daemon's resident memory per idle connection and per item,
// measured as deltas of its anonymous resident memory (RssAnon, /proc/PID/status: heap, stacks,
// anonymous maps) of a daemon this command starts; VmRSS is reported beside it. VmRSS also
// counts the binary's code pages, which fault in as a code path first runs: the first JOIN
// alone brings in about 1.1 MB of them, once per process, which a per-member figure must not
// count (it did, up to 1,100 B per member at 1,000 members).
//
// - Per idle connection: open N connections that complete HELLO/WELCOME and then do nothing;
//   (after − before) / N. Then the same connections each JOIN one room: the extra per joined
//   member is reported too. One connection handshakes and joins first, so the code both paths
//   run and the room itself are in the baselines.
// - Per item: in a fresh daemon (so freed connection memory is not reused), fill one room with K
//   items of fixed id and payload sizes by append_items batches, against the raw bytes of an
//   item (id + payload). Two figures:
//   - marginal: (RSS at K − RSS at K/2) / (K − K/2), what each further item costs. A room also
//     has costs that do not grow with its items, chiefly its DIFF history (at most
//     --history-bytes, 4 MiB by default), which the append batches fill long before K/2; the
//     difference leaves them out.
//   - all in: (RSS at K − RSS before the room) / K, those fixed costs spread over K items.
#if canImport(Glibc)
    import ArgumentParser
    import Glibc
    import SnapSyncModel
    import SnapSyncWire

    struct FanoutMemoryCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "memory",
            abstract: "The daemon's memory per idle connection and per item (RssAnon deltas).")

        @OptionGroup var launch: DaemonOptions

        @Option(help: "Idle connections to open.")
        var connections: Int = 1000

        @Option(help: "Items to put in the room.")
        var items: Int = 100_000

        @Option(name: .customLong("id-bytes"), help: "Bytes per item identifier (at least 8).")
        var idBytes: Int = 16

        @Option(name: .customLong("payload-bytes"), help: "Bytes per item payload.")
        var payloadBytes: Int = 64

        @Option(help: "Items per append_items MUTATE.")
        var batch: Int = 1000

        @OptionGroup var output: JSONOutputOption

        func validate() throws {
            if connections < 1 || items < 1 || batch < 1 { throw ValidationError("--connections, --items and --batch must be positive") }
            if idBytes < 8 { throw ValidationError("--id-bytes must be at least 8 (ids are unique decimal numbers)") }
            if payloadBytes < 0 { throw ValidationError("--payload-bytes must not be negative") }
        }

        func run() throws {
            signal(SIGPIPE, SIG_IGN)
            BenchSystem.raiseFileLimit(atLeast: connections + 64)
            let binary = ServerBinaries.daemon(explicit: launch.binary.serverBinary)
            try measureConnections(binary: binary)
            try measureItems(binary: binary)
        }

        /// Resident memory: anonymous (what the figures are read from) and all (VmRSS).
        private struct Resident {
            var anonymous: Int
            var all: Int
        }

        /// Lets the daemon finish what it was doing and the kernel account it, then reads RssAnon
        /// and VmRSS.
        private func settled(_ pid: Int32) -> Resident {
            BenchSystem.sleepMs(300)
            return Resident(anonymous: BenchSystem.anonymousResidentBytes(pid: pid) ?? 0, all: BenchSystem.residentBytes(pid: pid) ?? 0)
        }

        private func measureConnections(binary: String) throws {
            let daemon = ServerProcess.startDaemon(binary: binary, arguments: launch.arguments, cpu: nil)
            defer { daemon.stop() }
            // One connection first, handshaken and joined, so one-time costs (the first accept,
            // buffers, logging, the room, the code of both paths) are in the baselines.
            let room = "memory-\(getpid())"
            let first = BenchSystem.connectTCP(host: daemon.host, port: daemon.port)
            var firstReader = BenchFrameReader(fd: first)
            BenchSystem.writeAll(first, BenchFrames.hello())
            firstReader.expect(.welcome, context: "HELLO")
            BenchSystem.writeAll(first, BenchFrames.join(requestID: 1, room: room))
            firstReader.expect(.snapshot, context: "JOIN")
            let before = settled(daemon.pid)

            var fds: [Int32] = []
            var readers: [BenchFrameReader] = []
            var index = 0
            while index < connections {
                let upper = min(connections, index + 64)
                var pending: [Int32] = []
                for _ in index..<upper {
                    let fd = BenchSystem.connectTCP(host: daemon.host, port: daemon.port)
                    BenchSystem.writeAll(fd, BenchFrames.hello())
                    pending.append(fd)
                }
                for fd in pending {
                    var reader = BenchFrameReader(fd: fd)
                    reader.expect(.welcome, context: "HELLO")
                    fds.append(fd)
                    readers.append(reader)
                }
                index = upper
            }
            let handshaken = settled(daemon.pid)
            let perConnection = Double(handshaken.anonymous - before.anonymous) / Double(connections)
            let perConnectionAll = Double(handshaken.all - before.all) / Double(connections)
            report(
                name: "idle_connection",
                fields: [
                    ("connections", .int(Int(connections))), ("anon_before_bytes", .int(before.anonymous)), ("anon_after_bytes", .int(handshaken.anonymous)),
                    ("rss_before_bytes", .int(before.all)), ("rss_after_bytes", .int(handshaken.all)),
                    ("bytes_per_connection", .decimal(perConnection, digits: 0)), ("rss_bytes_per_connection", .decimal(perConnectionAll, digits: 0)),
                    ("target_bytes", 8192), ("target_met", .bool(perConnection <= 8192)),
                ],
                text:
                    "idle handshaken connection: \(Bench.decimal(perConnection, digits: 0)) B each (VmRSS: \(Bench.decimal(perConnectionAll, digits: 0)) B; \(connections) connections, RssAnon \(before.anonymous / 1024) → \(handshaken.anonymous / 1024) KiB; target ≤ 8192 B)"
            )

            for fd in fds { BenchSystem.writeAll(fd, BenchFrames.join(requestID: 1, room: room)) }
            for i in readers.indices { readers[i].expect(.snapshot, context: "JOIN") }
            let joined = settled(daemon.pid)
            let perMember = Double(joined.anonymous - handshaken.anonymous) / Double(connections)
            let perMemberAll = Double(joined.all - handshaken.all) / Double(connections)
            report(
                name: "room_member",
                fields: [
                    ("connections", .int(Int(connections))), ("anon_before_bytes", .int(handshaken.anonymous)), ("anon_after_bytes", .int(joined.anonymous)),
                    ("rss_before_bytes", .int(handshaken.all)), ("rss_after_bytes", .int(joined.all)),
                    ("extra_bytes_per_member", .decimal(perMember, digits: 0)), ("rss_extra_bytes_per_member", .decimal(perMemberAll, digits: 0)),
                    ("target_bytes", 1024), ("target_met", .bool(perMember < 1024)),
                ],
                text:
                    "joining one room: \(Bench.decimal(perMember, digits: 0)) B more per member (VmRSS: \(Bench.decimal(perMemberAll, digits: 0)) B; RssAnon → \(joined.anonymous / 1024) KiB; target < 1024 B)"
            )
            for fd in fds { close(fd) }
            close(first)
        }

        private func measureItems(binary: String) throws {
            let daemon = ServerProcess.startDaemon(binary: binary, arguments: launch.arguments, cpu: nil)
            defer { daemon.stop() }
            let fd = BenchSystem.connectTCP(host: daemon.host, port: daemon.port)
            defer { close(fd) }
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello())
            let limits = reader.expectWelcome(context: "HELLO")
            let room = "memory-items-\(getpid())"
            var requestID: UInt64 = 1
            BenchSystem.writeAll(fd, BenchFrames.mutate(requestID: requestID, room: room, ops: [.appendSections([SnapshotElement(BenchFrames.section)])]))
            reader.expect(.ack, context: "creating room \(room)")

            // Respect the daemon's limits rather than measure its rejections.
            var count = items
            let rawPerItem = idBytes + payloadBytes
            if count > limits.model.maxItems {
                count = limits.model.maxItems
                note("--items lowered to the daemon's max_items_per_room, \(count)")
            }
            let encodedPerItem = rawPerItem + 4  // two length varints, generously
            if count * encodedPerItem + 64 > limits.model.maxSnapshotBytes {
                count = (limits.model.maxSnapshotBytes - 64) / encodedPerItem
                note("--items lowered to fit the daemon's max_snapshot_bytes, \(count)")
            }
            var perBatch = batch
            if perBatch * encodedPerItem + 256 > limits.maxFrameBytes {
                perBatch = max(1, (limits.maxFrameBytes - 256) / encodedPerItem)
            }
            let history = limits.historyCount

            // A warm-up batch in another room, so allocator arenas and code paths exist before the baseline.
            BenchSystem.writeAll(fd, BenchFrames.mutate(requestID: 1000, room: room + "-warm", ops: [.appendSections([SnapshotElement(BenchFrames.section)])]))
            reader.expect(.ack, context: "warm-up")
            requestID = 2
            let before = settled(daemon.pid).anonymous

            let payload = SnapshotPayload([UInt8](repeating: UInt8(ascii: "p"), count: payloadBytes))
            var next = 0
            var half: (items: Int, rss: Int)?
            while next < count {
                if half == nil && next >= count / 2 && next > 0 { half = (next, settled(daemon.pid).anonymous) }
                let upper = min(count, next + perBatch)
                var elements: [SnapshotElement] = []
                elements.reserveCapacity(upper - next)
                for n in next..<upper {
                    let digits = Array(String(n).utf8)
                    let id = [UInt8](repeating: UInt8(ascii: "0"), count: idBytes - digits.count) + digits
                    elements.append(SnapshotElement(SnapshotIdentifier(id), payload: payload))
                }
                let ops: [SnapshotOperation] = [.appendItems(elements, toSection: BenchFrames.section)]
                BenchSystem.writeAll(fd, BenchFrames.mutate(requestID: requestID, room: room, ops: ops))
                requestID += 1
                reader.expect(.ack, context: "append_items")
                next = upper
            }
            let filled = settled(daemon.pid).anonymous
            let middle = half ?? (0, before)
            let marginal = Double(filled - middle.rss) / Double(count - middle.items)
            let allIn = Double(filled - before) / Double(count)
            let raw = Double(rawPerItem)
            report(
                name: "item",
                fields: [
                    ("items", .int(Int(count))), ("id_bytes", .int(Int(idBytes))), ("payload_bytes", .int(Int(payloadBytes))),
                    ("raw_bytes_per_item", .int(Int(rawPerItem))), ("batch", .int(Int(perBatch))), ("history_count", .int(Int(history))),
                    ("anon_before_bytes", .int(Int(before))), ("items_at_half", .int(Int(middle.items))), ("anon_at_half_bytes", .int(Int(middle.rss))),
                    ("anon_after_bytes", .int(Int(filled))),
                    ("bytes_per_item", .decimal(marginal, digits: 1)), ("ratio_to_raw", .decimal(marginal / raw, digits: 2)),
                    ("target_ratio", 2), ("target_met", .bool(marginal / raw <= 2)),
                    ("all_in_bytes_per_item", .decimal(allIn, digits: 1)), ("all_in_ratio_to_raw", .decimal(allIn / raw, digits: 2)),
                ],
                text: """
                    item (\(idBytes) B id + \(payloadBytes) B payload = \(rawPerItem) B raw): \(Bench.decimal(marginal, digits: 1)) B each = \(Bench.decimal(marginal / raw, digits: 2))× raw, from item \(middle.items) to \(count) (RssAnon \(middle.rss / 1024) → \(filled / 1024) KiB; target ≤ 2×)
                      all in: \(Bench.decimal(allIn, digits: 1)) B per item = \(Bench.decimal(allIn / raw, digits: 2))× raw over all \(count) items, with the room's fixed costs (DIFF history up to --history-bytes) (RssAnon \(before / 1024) → \(filled / 1024) KiB, batches of \(perBatch))
                    """)
        }

        private func note(_ message: String) { BenchSystem.printError("snapsync-bench: \(message)\n") }

        private func report(name: String, fields: [(String, JSONValue)], text: String) {
            if output.json {
                Bench.printJSON([("measurement", .string(name))] + fields)
            } else {
                print(text)
            }
        }
    }
#endif
