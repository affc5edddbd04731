#if canImport(Glibc)
    import Glibc
    private let streamSocket = Int32(SOCK_STREAM.rawValue)
#elseif canImport(Darwin)
    import Darwin
    private let streamSocket = SOCK_STREAM
#endif

/// A loopback TCP port nobody listens on, for as long as this value lives: a socket bound to
/// it (so that nothing else takes the port meanwhile) that never listens, so a connect to it is
/// refused at once. A dead endpoint for failover tests.
final class ClosedPort: Sendable {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let host = "127.0.0.1"
    let port: Int
    private let fd: Int32

    init() throws {
        let fd = socket(AF_INET, streamSocket, 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = 0
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            close(fd)
            throw Failure(description: "bind/getsockname: errno \(errno)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        close(fd)
    }
}
