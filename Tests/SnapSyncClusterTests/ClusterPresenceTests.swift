import Foundation
import SnapSyncWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// Presence across nodes (docs/cluster.md, "Presence"), end to end: `scripts/cluster` runs 3
// real nats-servers and 2 real `snapsyncd --cluster` nodes; version 4 clients speak raw frames
// (SnapSyncWire's codec) to them. A watcher on node s2 sees a member of node s1 join, change
// its state and leave; then, after `kill -9` of s1, its members leave with `node_lost`. Every
// wait is bounded; nothing is timed beyond the bounds.

extension RealNATSCluster {
    @Suite struct ClusterPresenceTests {
        /// The nodes' `--cluster-presence-timeout`, in seconds.
        static let presenceTimeout = 2.0
        /// What a change may take to reach a watcher on another node: a NATS hop and a presence
        /// interval, on 2 loaded cores. Generous: a bound, not a measurement.
        static let propagation = 15.0

        @Test func aMemberOnOneNodeIsSeenByAWatcherOnAnotherAndLeavesWithItsNode() throws {
            let cluster = try NodesCluster(nodes: 2, arguments: ["--cluster-presence-timeout", "\(Self.presenceTimeout)"])
            defer { cluster.down() }
            let room = "presence-\(UInt32.random(in: 0 ... .max))"

            // The watcher on s2: a member itself, watching.
            let watcher = try FrameClient(address: cluster.nodes[1])
            let watcherID = try watcher.hello()
            try watcher.join(room)
            let view = try watcher.request { .presenceWatch(requestID: $0, room: room, watch: true) }
            guard case .presence(_, _, _, let members, _) = view else { throw FrameClientError("expected PRESENCE, got \(view)") }
            #expect(members.map(\.memberID) == [watcherID])

            // A member on s1: its id is another node's (another tag in the high 32 bits).
            let member = try FrameClient(address: cluster.nodes[0])
            let memberID = try member.hello(name: "member-on-s1")
            #expect(memberID >> 32 != 0 && watcherID >> 32 != 0 && memberID >> 32 != watcherID >> 32)
            try member.join(room)
            let joined = try watcher.awaitChange(within: Self.propagation) {
                if case .joined(let entry) = $0, entry.memberID == memberID { entry } else { nil }
            }
            #expect(joined.principal == "member-on-s1")

            // Its state.
            let ack = try member.request { .setPresence(requestID: $0, room: room, state: [7, 7]) }
            guard case .ack = ack else { throw FrameClientError("expected ACK of SET_PRESENCE, got \(ack)") }
            let state = try watcher.awaitChange(within: Self.propagation) {
                if case .state(let id, let state) = $0, id == memberID { state } else { nil }
            }
            #expect(state == [7, 7])

            // Its LEAVE: reason left.
            _ = try member.request { .leave(requestID: $0, room: room) }
            let reason = try watcher.awaitChange(within: Self.propagation) {
                if case .left(let id, let reason) = $0, id == memberID { reason } else { nil }
            }
            #expect(PresenceDeparture(byte: reason) == .left)

            // Another member on s1, then s1 killed: it leaves with node_lost within the timeout
            // (plus the propagation's bound).
            let doomed = try FrameClient(address: cluster.nodes[0])
            let doomedID = try doomed.hello(name: "doomed")
            try doomed.join(room)
            _ = try watcher.awaitChange(within: Self.propagation) {
                if case .joined(let entry) = $0, entry.memberID == doomedID { entry } else { nil }
            }
            try cluster.kill("s1")
            let lost = try watcher.awaitChange(within: Self.presenceTimeout + Self.propagation) {
                if case .left(let id, let reason) = $0, id == doomedID { reason } else { nil }
            }
            #expect(PresenceDeparture(byte: lost) == .nodeLost)
            let list = try watcher.request { .presenceList(requestID: $0, room: room, after: 0, limit: 0) }
            guard case .presence(_, _, let count, let left, _) = list else { throw FrameClientError("expected PRESENCE, got \(list)") }
            #expect(count == 1 && left.map(\.memberID) == [watcherID])
            #expect(cluster.log(node: 2).contains("declared lost"))
        }

        /// A node paused past the timeout (SIGSTOP: a hung process, or one cut off) is declared
        /// lost, its member leaving with node_lost; resumed, it is heard again and asked for
        /// its members, which come back.
        @Test func aNodeHeardAgainAfterItWasLostIsAskedForItsMembersAgain() throws {
            let cluster = try NodesCluster(nodes: 2, arguments: ["--cluster-presence-timeout", "\(Self.presenceTimeout)"])
            defer { cluster.down() }
            let room = "presence-\(UInt32.random(in: 0 ... .max))"
            let watcher = try FrameClient(address: cluster.nodes[1])
            _ = try watcher.hello()
            try watcher.join(room)
            _ = try watcher.request { .presenceWatch(requestID: $0, room: room, watch: true) }
            let member = try FrameClient(address: cluster.nodes[0])
            let memberID = try member.hello(name: "paused")
            try member.join(room)
            _ = try watcher.awaitChange(within: Self.propagation) {
                if case .joined(let entry) = $0, entry.memberID == memberID { entry } else { nil }
            }
            try cluster.signal("pause", "s1")
            let lost = try watcher.awaitChange(within: Self.presenceTimeout + Self.propagation) {
                if case .left(let id, let reason) = $0, id == memberID { reason } else { nil }
            }
            #expect(PresenceDeparture(byte: lost) == .nodeLost)
            try cluster.signal("resume", "s1")
            let back = try watcher.awaitChange(within: Self.propagation) {
                if case .joined(let entry) = $0, entry.memberID == memberID { entry } else { nil }
            }
            #expect(back.principal == "paused")
            #expect(cluster.log(node: 2).contains("heard again after it was declared lost"))
        }
    }
}

/// `scripts/cluster` with `nodes` snapsyncd nodes (this build's, `$SNAPSYNCD` or next to the
/// test bundle), `arguments` added to each; `down()` stops it all and removes its directory.
final class NodesCluster {
    let directory: String
    /// `host:port` of each node (s1, s2, ...).
    let nodes: [(host: String, port: Int)]

    init(nodes count: Int, arguments: [String]) throws {
        directory = NSTemporaryDirectory() + "snapsync-presence-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let output: String
        do {
            output = try Self.run(["up", "--dir", directory, "--nodes", "\(count)", "--"] + arguments)
        } catch {
            _ = try? Self.run(["down", "--dir", directory])
            throw error
        }
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("SNAPSYNC_NODES=") }) else {
            _ = try? Self.run(["down", "--dir", directory])
            throw TestClusterError(message: "scripts/cluster up printed no SNAPSYNC_NODES line: \(output)")
        }
        nodes = line.dropFirst("SNAPSYNC_NODES=".count).split(separator: ",").map { address in
            let parts = address.split(separator: ":")
            return (String(parts[0]), Int(parts[1]) ?? 0)
        }
    }

    /// SIGKILL to node `name` (s1, s2, ...); returns once it is gone.
    func kill(_ name: String) throws {
        _ = try Self.run(["kill", name, "--dir", directory])
    }

    /// `scripts/cluster pause|resume NAME`: SIGSTOP or SIGCONT to a node.
    func signal(_ command: String, _ name: String) throws {
        _ = try Self.run([command, name, "--dir", directory])
    }

    /// Node `index`'s log (1-based, as its name).
    func log(node index: Int) -> String {
        (try? String(contentsOfFile: "\(directory)/s\(index)/snapsyncd.log", encoding: .utf8)) ?? ""
    }

    func down() {
        _ = try? Self.run(["down", "--dir", directory])
    }

    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["SNAPSYNCD"], !path.isEmpty { return path }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("snapsyncd").path
            if access(candidate, X_OK) == 0 { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return TestCluster.repository + "/.build/debug/snapsyncd"
    }

    @discardableResult
    private static func run(_ arguments: [String]) throws -> String {
        try TestCluster.runScript(arguments, environment: ["SNAPSYNCD": binary])
    }
}

struct FrameClientError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A blocking client of raw frames (SnapSyncWire's codec, protocol version 4) with a deadline
/// on every read: a test fails, never hangs.
final class FrameClient {
    private let fd: Int32
    private var decoder = FrameDecoder(limits: WireLimits(maxFrameBytes: 64 << 20), accepting: .server)
    private var nextRequestID: UInt64 = 1
    /// PRESENCE_DIFF changes received and not yet matched by `awaitChange`.
    private var changes: [PresenceChange] = []

    init(address: (host: String, port: Int)) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = in_port_t(UInt16(address.port).bigEndian)
        inet_pton(AF_INET, address.host, &sin.sin_addr)
        let connected = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // deinit closes fd when this throws (every stored property is set): closing it here too
        // would close whatever descriptor another thread was given that number meanwhile.
        guard connected == 0 else {
            throw FrameClientError("connect to \(address.host):\(address.port): errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// HELLO offering version 4; returns WELCOME's session id.
    func hello(name: String = "presence-test") throws -> UInt64 {
        try send(.hello(versions: [4], clientName: name, credentials: []))
        let welcome = try receive(within: 30)
        guard case .welcome(let version, let sessionID, _, _) = welcome, version == 4 else {
            throw FrameClientError("expected WELCOME of version 4, got \(welcome)")
        }
        decoder.version = version
        return sessionID
    }

    func join(_ room: String) throws {
        let answer = try request { .join(requestID: $0, room: room, resume: nil) }
        guard case .snapshot = answer else { throw FrameClientError("expected SNAPSHOT for JOIN \(room), got \(answer)") }
    }

    /// Sends a request; returns the answer carrying its id (PRESENCE_DIFFs meanwhile are kept).
    func request(_ make: (UInt64) -> Message) throws -> Message {
        let id = nextRequestID
        nextRequestID += 1
        try send(make(id))
        let deadline = Date().addingTimeInterval(60)
        while true {
            let message = try receive(within: deadline.timeIntervalSinceNow)
            if message.requestID == id { return message }
        }
    }

    /// The first PRESENCE_DIFF change (kept or arriving within `seconds`) that `match` takes.
    func awaitChange<T>(within seconds: Double, _ match: (PresenceChange) -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let index = changes.firstIndex(where: { match($0) != nil }) {
                let change = changes.remove(at: index)
                if let found = match(change) { return found }
            }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw FrameClientError("no matching presence change within \(seconds) s; unmatched: \(changes)") }
            _ = try receive(within: remaining)
        }
    }

    private func send(_ message: Message) throws {
        let bytes = FrameEncoder().encode(message)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw FrameClientError("send: errno \(errno)") }
            offset += n
        }
    }

    /// The next frame within `seconds`; PRESENCE_DIFF changes are also kept for `awaitChange`.
    @discardableResult
    private func receive(within seconds: Double) throws -> Message {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let message = try decoder.nextMessage() {
                if case .presenceDiff(_, _, let diff) = message { changes += diff }
                return message
            }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw FrameClientError("no frame within \(seconds) s") }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, Int32(remaining * 1000) + 1) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw FrameClientError("connection closed (recv \(n), errno \(errno))") }
            decoder.append(buffer[0..<n])
        }
    }
}
