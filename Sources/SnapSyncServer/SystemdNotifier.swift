internal import Glibc

/// sd_notify(3) without libsystemd: one datagram on the AF_UNIX socket named by `NOTIFY_SOCKET`
/// (a path, or `@name` in the abstract namespace), e.g. `READY=1` once listening and
/// `STOPPING=1` at shutdown, so that `Type=notify` units start dependants at the right time.
///
/// Without `NOTIFY_SOCKET` (not under systemd) every call does nothing. Failures are returned,
/// never fatal: the daemon serves clients whether or not systemd hears from it.
struct SystemdNotifier {
    let address: SocketAddress?

    /// The socket named by `NOTIFY_SOCKET`.
    init() {
        self.init(socket: getenv("NOTIFY_SOCKET").map { String(cString: $0) })
    }

    init(socket value: String?) {
        address = value.flatMap { SocketAddress(unixPath: $0) }
    }

    var isEnabled: Bool { address != nil }

    /// Sends `state` ("READY=1\nSTATUS=...") as one datagram.
    func notify(_ state: String) throws(SystemError) {
        guard let address else { return }
        // Qualified: with COpenSSL in the module, the bare name no longer resolves to Glibc's.
        let fd = try Syscall.socket(domain: AF_UNIX, type: Int32(Glibc.SOCK_DGRAM.rawValue))
        defer { Syscall.close(fd) }
        try Syscall.sendDatagram(fd, Array(state.utf8), to: address)
    }
}
