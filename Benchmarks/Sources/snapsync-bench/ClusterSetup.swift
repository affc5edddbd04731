// The connections of one `cluster` run, made with blocking sockets before the measured loop
// (ClusterGenerator makes them non-blocking): the rooms' layout, the subscribers joined to every
// room, the writers.
#if canImport(Glibc)
    import Glibc
    import SnapSyncModel
    import SnapSyncWire

    enum ClusterSetup {
        /// `endpoints` as host and port ("127.0.0.1:4001"); exits on anything else.
        static func parse(endpoint: String) -> (host: String, port: Int) {
            guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]), port > 0, port < 65536
            else { BenchSystem.die("--nodes takes HOST:PORT entries, not \(endpoint)") }
            let host = String(endpoint[..<colon])
            return (host.isEmpty ? "127.0.0.1" : host, port)
        }

        /// Creates each room's layout (section "s", item "i"; through the first node when the
        /// nodes share rooms, else on every node), joins `subscribersPerNode` subscribers per
        /// node to every room, and connects the writers (writer w to node w mod N).
        static func connect(endpoints: [String], rooms: [String], load: ClusterLoad) -> ClusterConnections {
            let addresses = endpoints.map(parse(endpoint:))
            for index in load.sharedRooms ? [0] : Array(addresses.indices) {
                let address = addresses[index]
                let fd = BenchSystem.connectTCP(host: address.host, port: address.port)
                var reader = BenchFrameReader(fd: fd)
                BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "snapsync-bench cluster setup"))
                let limits = reader.expectWelcome(context: "HELLO to \(endpoints[index])")
                if load.payloadBytes > limits.model.maxPayloadBytes {
                    BenchSystem.die("payload \(load.payloadBytes) B exceeds \(endpoints[index])'s max_payload_bytes \(limits.model.maxPayloadBytes)")
                }
                let payload = [UInt8](repeating: UInt8(ascii: "x"), count: load.payloadBytes)
                var frames: [UInt8] = []
                for (r, room) in rooms.enumerated() { frames += BenchFrames.createLayout(requestID: UInt64(r + 1), room: room, payload: payload) }
                BenchSystem.writeAll(fd, frames)
                for room in rooms { reader.expect(.ack, context: "creating room \(room) on \(endpoints[index])") }
                close(fd)
            }

            var subscribers: [Int32] = []
            subscribers.reserveCapacity(endpoints.count * load.subscribersPerNode)
            var joins = BenchFrames.hello(clientName: "snapsync-bench subscriber")
            for (r, room) in rooms.enumerated() { joins += BenchFrames.join(requestID: UInt64(r + 1), room: room) }
            for (index, address) in addresses.enumerated() {
                var made = 0
                let batch = 64  // pipelined HELLO and JOINs, then the answers: 2 round trips per 64
                while made < load.subscribersPerNode {
                    let upper = min(load.subscribersPerNode, made + batch)
                    var pending: [Int32] = []
                    for _ in made..<upper {
                        let fd = BenchSystem.connectTCP(host: address.host, port: address.port)
                        BenchSystem.writeAll(fd, joins)
                        pending.append(fd)
                    }
                    for fd in pending {
                        var reader = BenchFrameReader(fd: fd)
                        reader.expect(.welcome, context: "a subscriber's HELLO to \(endpoints[index])")
                        for room in rooms { reader.expect(.snapshot, context: "a subscriber's JOIN \(room) on \(endpoints[index])") }
                        subscribers.append(fd)
                    }
                    made = upper
                }
            }

            var writers: [Int32] = []
            for w in 0..<load.writers {
                let index = w % addresses.count
                let fd = BenchSystem.connectTCP(host: addresses[index].host, port: addresses[index].port)
                var reader = BenchFrameReader(fd: fd)
                BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "snapsync-bench writer \(w)"))
                _ = reader.expectWelcome(context: "writer \(w)'s HELLO to \(endpoints[index])")
                writers.append(fd)
            }
            return ClusterConnections(endpoints: endpoints, subscribers: subscribers, writers: writers, rooms: rooms)
        }
    }
#endif
