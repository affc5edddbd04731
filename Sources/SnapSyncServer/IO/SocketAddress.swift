internal import Glibc

/// An IPv4, IPv6 or Unix-domain socket address, as the kernel takes it (`sockaddr_storage`).
package struct SocketAddress: CustomStringConvertible, Sendable {
    var storage: sockaddr_storage
    var length: socklen_t

    init(storage: sockaddr_storage, length: socklen_t) {
        self.storage = storage
        self.length = length
    }

    /// Resolves a listening address with `getaddrinfo(host, port, AI_PASSIVE | AI_NUMERICSERV)`.
    /// `host` is a numeric IPv4 or IPv6 address (brackets allowed: `[::1]`) or a name such as
    /// `localhost`; the first address returned is used.
    package init(host: String, port: Int) throws(AddressError) {
        var name = host
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        guard (0...65535).contains(port) else { throw AddressError(host: host, port: port, reason: "port must be 0...65535") }
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(name.isEmpty ? nil : name, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw AddressError(host: host, port: port, reason: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        var storage = sockaddr_storage()
        let length = first.pointee.ai_addrlen
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(length)))
        }
        self.init(storage: storage, length: length)
    }

    /// A Unix-domain datagram address for sd_notify: a path, or with a leading `@` a name in
    /// Linux's abstract namespace (the `@` becomes a NUL byte, and the length excludes padding).
    init?(unixPath path: String) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        // A path is NUL-terminated (the zeroed struct supplies it); an abstract name is exactly
        // its bytes.
        let length = pathOffset + bytes.count + (abstract ? 0 : 1)
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            withUnsafeBytes(of: &address) { target.copyMemory(from: $0) }
        }
        self.init(storage: storage, length: socklen_t(length))
    }

    var family: Int32 { Int32(storage.ss_family) }

    /// The port of an IPv4 or IPv6 address, 0 otherwise.
    package var port: Int {
        withUnsafeBytes(of: storage) { raw in
            switch Int32(storage.ss_family) {
            case AF_INET: Int(UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port))
            case AF_INET6: Int(UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port))
            default: 0
            }
        }
    }

    /// The numeric host (`inet_ntop`), without brackets.
    package var host: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        return withUnsafeBytes(of: storage) { raw -> String in
            switch Int32(storage.ss_family) {
            case AF_INET:
                var address = raw.load(as: sockaddr_in.self).sin_addr
                guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return "?" }
            case AF_INET6:
                var address = raw.load(as: sockaddr_in6.self).sin6_addr
                guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return "?" }
            default:
                return "unix"
            }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// Whether only this machine can reach the address: IPv4 127.0.0.0/8, IPv6 `::1`, or an
    /// IPv4-mapped 127.x address. An empty host resolves to the wildcard address: not loopback.
    package var isLoopback: Bool {
        withUnsafeBytes(of: storage) { raw in
            switch Int32(storage.ss_family) {
            case AF_INET:
                let address = raw.load(as: sockaddr_in.self).sin_addr
                return withUnsafeBytes(of: address) { $0[0] == 127 }
            case AF_INET6:
                let address = raw.load(as: sockaddr_in6.self).sin6_addr
                return withUnsafeBytes(of: address) { bytes in
                    let loopback = bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1
                    let mapped = bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
                    return loopback || mapped
                }
            default:
                return false
            }
        }
    }

    /// `127.0.0.1:7400`, `[::1]:7400`.
    package var description: String {
        family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    func withSockaddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        var copy = storage
        return try withUnsafePointer(to: &copy) { (pointer) throws(E) -> R in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (address) throws(E) -> R in
                try body(address, length)
            }
        }
    }
}

/// A `--host`/`--port` pair that does not name a usable address.
package struct AddressError: Error, CustomStringConvertible, Sendable {
    package var host: String
    package var port: Int
    package var reason: String
    package var description: String { "cannot use address \(host) port \(port): \(reason)" }
}
