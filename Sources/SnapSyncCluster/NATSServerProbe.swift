internal import Foundation

#if canImport(Glibc)
    internal import Glibc
#endif

/// What a nats-server says of itself before a client speaks: the NATS protocol's first line,
/// `INFO {json}`, which the server sends in plaintext even when it requires TLS (the upgrade
/// comes after it), unless it is configured with `handshake_first`. libnats parses that line but
/// has no call that returns its `version`, so this reads it on a TCP connection of its own,
/// opened and closed before libnats connects (`NATSServerVersionCheck`).
///
/// Bounded: `timeout` covers the name lookup's result, the connection and the line together
/// (the lookup itself is getaddrinfo's, which takes no timeout); the line may be at most
/// `maxLineBytes`. This file is a C boundary (getaddrinfo, socket, connect, poll, recv): every
/// call's result is checked in `probeCheck` (getaddrinfo's, which reports otherwise, where it
/// is called).
package enum NATSServerProbe {
    /// What one server's first line said.
    package struct Info: Equatable, Sendable {
        /// The INFO's `version`, as the server wrote it.
        package var version: String
        /// The INFO's `server_name` (its `server_id` when it has no name).
        package var name: String?
    }

    /// The INFO of the server at `url` (`nats://` or `tls://`, optionally with `user:pass@` and
    /// a port, 4222 by default), or why there is none: no answer in time, refused, closed, a
    /// first line that is not an INFO, or one longer than `maxLineBytes`.
    package static func info(url: String, timeout: Duration = .seconds(5), maxLineBytes: Int = 64 * 1024) -> Result<Info, ProbeFailure> {
        guard let found = address(of: url) else { return .failure(ProbeFailure(message: "not a host:port URL")) }
        let deadline = ContinuousClock.now + timeout
        do throws(ProbeFailure) {
            let fd = try connect(host: found.host, port: found.port, deadline: deadline)
            defer { close(fd) }
            return .success(try parse(readLine(fd, deadline: deadline, maxBytes: maxLineBytes)))
        } catch {
            return .failure(error)
        }
    }

    /// Why a probe read no INFO.
    package struct ProbeFailure: Error, Equatable, Sendable, CustomStringConvertible {
        package var message: String
        package var description: String { message }
    }

    /// The host and port of a `scheme://[user[:password]@]host[:port]` URL (an IPv6 host in
    /// brackets), nil when it has no host.
    static func address(of url: String) -> (host: String, port: String)? {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var host: Substring
        var port: Substring = "4222"
        if rest.first == "[" {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.first == ":" { port = after.dropFirst() }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            port = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !port.isEmpty else { return nil }
        return (String(host), String(port))
    }

    /// The `Info` of an `INFO {json}` line (its `\r\n` already cut).
    static func parse(_ line: [UInt8]) throws(ProbeFailure) -> Info {
        struct Fields: Decodable {
            var version: String?
            var server_name: String?
            var server_id: String?
        }
        let prefix = Array("INFO ".utf8)
        guard line.starts(with: prefix) else {
            throw ProbeFailure(message: "the server's first line is not an INFO: \(String(decoding: line.prefix(40), as: UTF8.self))")
        }
        guard let fields = try? JSONDecoder().decode(Fields.self, from: Data(line.dropFirst(prefix.count))) else {
            throw ProbeFailure(message: "the server's INFO is not a JSON object")
        }
        guard let version = fields.version else { throw ProbeFailure(message: "the server's INFO has no version") }
        return Info(version: version, name: fields.server_name ?? fields.server_id)
    }

    /// A connected, non-blocking TCP socket to the first of `host`'s addresses that accepts.
    private static func connect(host: String, port: String, deadline: ContinuousClock.Instant) throws(ProbeFailure) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let looked = getaddrinfo(host, port, &hints, &list)
        guard looked == 0 else { throw ProbeFailure(message: "getaddrinfo \(host): \(String(cString: gai_strerror(looked)))") }
        defer { freeaddrinfo(list) }
        var last = ProbeFailure(message: "getaddrinfo \(host): no address")
        var entry = list
        while let address = entry?.pointee {
            entry = address.ai_next
            do throws(ProbeFailure) {
                let fd = Int32(
                    try probeCheck(
                        socket(address.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0), "socket"))
                do throws(ProbeFailure) {
                    if Glibc.connect(fd, address.ai_addr, address.ai_addrlen) != 0 {
                        guard errno == EINPROGRESS else { throw failure("connect", errno) }
                        try wait(fd, for: Int16(POLLOUT), deadline: deadline, doing: "connect")
                        var error: Int32 = 0
                        var length = socklen_t(MemoryLayout<Int32>.size)
                        _ = try probeCheck(getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length), "getsockopt SO_ERROR")
                        if error != 0 { throw failure("connect", error) }
                    }
                    return fd
                } catch {
                    close(fd)
                    throw error
                }
            } catch {
                last = error
            }
        }
        throw last
    }

    /// The bytes up to the first `\r\n` (or `\n`), read as they come until `deadline`.
    private static func readLine(_ fd: Int32, deadline: ContinuousClock.Instant, maxBytes: Int) throws(ProbeFailure) -> [UInt8] {
        var line: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let end = line.firstIndex(of: UInt8(ascii: "\n")) {
                let cut = end > 0 && line[end - 1] == UInt8(ascii: "\r") ? end - 1 : end
                return Array(line[..<cut])
            }
            guard line.count <= maxBytes else { throw ProbeFailure(message: "the server's first line is longer than \(maxBytes) bytes") }
            try wait(fd, for: Int16(POLLIN), deadline: deadline, doing: "read the INFO line")
            let count = try probeCheck(chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }, "recv")
            guard count > 0 else { throw ProbeFailure(message: "the server closed the connection before its INFO line") }
            line += chunk[..<count]
        }
    }

    /// Polls `fd` for `events` until `deadline`; EINTR polls again.
    private static func wait(_ fd: Int32, for events: Int16, deadline: ContinuousClock.Instant, doing what: String) throws(ProbeFailure) {
        while true {
            let left = max(0, (deadline - ContinuousClock.now).milliseconds)
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: left))
            if ready < 0 && errno == EINTR { continue }
            if try probeCheck(ready, "poll") == 0 { throw ProbeFailure(message: "no answer within the probe's time to \(what)") }
            return
        }
    }

    /// The one place this file's system calls are checked: a negative result is a failure
    /// named after `call` with errno's text.
    private static func probeCheck<T: BinaryInteger>(_ result: T, _ call: String) throws(ProbeFailure) -> Int {
        guard result >= 0 else { throw failure(call, errno) }
        return Int(result)
    }

    /// `call` failed with the error number `code`.
    private static func failure(_ call: String, _ code: Int32) -> ProbeFailure {
        ProbeFailure(message: "\(call): \(String(cString: strerror(code)))")
    }
}
