// TLS for `fanout --tls`: the certificate both servers serve, made at run time with the openssl
// tool, and the generator's client sessions (OpenSSL, the same library the servers use).
//
// A session is registered under its socket's descriptor, so that the setup code that reads and
// writes descriptors (BenchFrameReader, RESP.readExactly, BenchSystem.writeAll) goes through TLS
// without being handed the session: `BenchTLS.read` and `BenchTLS.write` behave as read(2) and
// write(2) do, TLS or not. The generator is one thread, and so is the registry's use.
#if canImport(Glibc)
    import CBenchOpenSSL
    import Glibc

    enum BenchTLS {
        /// The certificate and key both servers serve (ECDSA P-256, self-signed, so it is its
        /// own CA for the clients and for redis-server's --tls-ca-cert-file).
        struct Files {
            let directory: String
            let certificate: String
            let key: String
        }

        /// Descriptor → its TLS session, for the descriptors that have one.
        nonisolated(unsafe) private static var sessions: [Int32: OpaquePointer] = [:]
        nonisolated(unsafe) private static var clientContext: OpaquePointer?

        /// `openssl req -x509` of an ECDSA P-256 key for CN=127.0.0.1, valid one day, in a new
        /// temporary directory (removed at exit).
        static func makeCertificates() -> Files {
            let directory = BenchCleanup.temporaryDirectory(
                under: BenchSystem.temporaryBase(default: "/tmp"), prefix: "snapsync-bench-tls")
            let files = Files(directory: directory, certificate: directory + "/cert.pem", key: directory + "/key.pem")
            let made = BenchCommand.run([
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", files.key, "-out", files.certificate,
            ])
            if !made {
                BenchSystem.die("openssl req could not make the benchmark's certificate (is the openssl tool installed? sudo apt-get install -y openssl)")
            }
            return files
        }

        /// The client context: TLS 1.2 or 1.3 (OpenSSL's default suites, as both servers), the
        /// certificate verified against `files`.
        static func prepareClient(_ files: Files) {
            guard clientContext == nil else { return }
            guard let context = SSL_CTX_new(TLS_client_method()) else { failure("SSL_CTX_new") }
            _ = snapsync_bench_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION)
            _ = snapsync_bench_ssl_ctx_set_mode(
                context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE) | Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
            guard SSL_CTX_load_verify_locations(context, files.certificate, nil) == 1 else {
                failure("loading \(files.certificate)")
            }
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            clientContext = context
        }

        /// TLS over the connected, blocking socket `fd`: the handshake, then the session is
        /// registered under `fd`.
        static func connect(_ fd: Int32) {
            guard let context = clientContext, let ssl = SSL_new(context) else { failure("SSL_new") }
            guard SSL_set_fd(ssl, fd) == 1 else { failure("SSL_set_fd") }
            ERR_clear_error()
            guard SSL_connect(ssl) == 1 else { failure("the TLS handshake with the server") }
            sessions[fd] = ssl
        }

        static func session(_ fd: Int32) -> OpaquePointer? { sessions[fd] }

        /// "TLSv1.3 TLS_AES_256_GCM_SHA384" for the session of `fd`.
        static func describe(_ fd: Int32) -> String {
            guard let ssl = sessions[fd] else { return "plain TCP" }
            let cipher = SSL_get_current_cipher(ssl).map { String(cString: SSL_CIPHER_get_name($0)) } ?? "?"
            return "\(String(cString: SSL_get_version(ssl))) \(cipher)"
        }

        /// Frees the session of `fd`, if it has one (before the descriptor is closed).
        static func forget(_ fd: Int32) {
            if let ssl = sessions.removeValue(forKey: fd) { SSL_free(ssl) }
        }

        /// read(2), through TLS when `fd` has a session: bytes, 0 at the peer's close, or -1 with
        /// errno EAGAIN (TLS wants to read or write first) or EIO.
        static func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
            guard let ssl = sessions[fd] else { return Glibc.read(fd, buffer, count) }
            return sslRead(ssl, buffer, count)
        }

        /// write(2), through TLS when `fd` has a session (as `read`).
        static func write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
            guard let ssl = sessions[fd] else { return Glibc.write(fd, buffer, count) }
            return sslWrite(ssl, buffer, count)
        }

        /// `SSL_read` with read(2)'s results. One record (at most 16 KiB) per call.
        @inline(__always)
        static func sslRead(_ ssl: OpaquePointer, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
            let n = SSL_read(ssl, buffer, Int32(clamping: count))
            return n > 0 ? Int(n) : errnoResult(ssl, n)
        }

        /// `SSL_write` with write(2)'s results. A write that returned EAGAIN must be retried with
        /// the same bytes first (more may follow them).
        @inline(__always)
        static func sslWrite(_ ssl: OpaquePointer, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
            let n = SSL_write(ssl, buffer, Int32(clamping: count))
            return n > 0 ? Int(n) : errnoResult(ssl, n)
        }

        private static func errnoResult(_ ssl: OpaquePointer, _ result: Int32) -> Int {
            switch SSL_get_error(ssl, result) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                errno = EAGAIN
                return -1
            case SSL_ERROR_ZERO_RETURN:
                return 0
            case SSL_ERROR_SYSCALL where errno == 0:
                return 0  // EOF without close_notify
            default:
                ERR_clear_error()
                if errno == 0 || errno == EAGAIN { errno = EIO }
                return -1
            }
        }

        private static func failure(_ what: String) -> Never {
            var reasons: [String] = []
            var buffer = [CChar](repeating: 0, count: 256)
            while case let code = ERR_get_error(), code != 0 {
                ERR_error_string_n(code, &buffer, buffer.count)
                reasons.append(BenchSystem.string(cString: buffer))
            }
            BenchSystem.die("TLS: \(what) failed\(reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; "))")
        }
    }
#endif
