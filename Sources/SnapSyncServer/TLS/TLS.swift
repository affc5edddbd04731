internal import COpenSSL
internal import Glibc
import SnapSyncHub

// The daemon's only contact with OpenSSL: a server context built from `TLSSettings`
// (`TLSContext`) and one non-blocking TLS session per connection (`TLSSession`). Every OpenSSL
// result is checked here, in `TLSError.require` (setup calls) and `TLSSession.outcome` (I/O
// calls), and every failure carries OpenSSL's error queue, read at the failure.

/// An OpenSSL call failed: the operation, and the reasons OpenSSL queued for it.
struct TLSError: Error, CustomStringConvertible {
    let operation: String
    let reasons: [String]
    /// The socket error behind an `SSL_ERROR_SYSCALL`, 0 for any other failure.
    var errno: Int32 = 0

    var description: String {
        reasons.isEmpty ? "\(operation) failed" : "\(operation) failed: \(reasons.joined(separator: "; "))"
    }

    /// The peer went away (reset, broken pipe): not worth more than a debug line.
    var isDisconnect: Bool { errno == ECONNRESET || errno == EPIPE }

    /// Empties OpenSSL's (thread-local) error queue into an error for `operation`.
    static func fromQueue(_ operation: String, errno: Int32 = 0) -> TLSError {
        var reasons: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        if errno != 0 { reasons.append(String(cString: strerror(errno))) }
        return TLSError(operation: operation, reasons: reasons, errno: errno)
    }

    /// Throws the queued reasons when a setup call did not succeed.
    static func require(_ succeeded: Bool, _ operation: @autoclosure () -> String) throws(TLSError) {
        if !succeeded { throw fromQueue(operation()) }
    }
}

/// A server `SSL_CTX`: certificate chain and key (checked to match), minimum version, TLS 1.2
/// ciphers, optional client verification (mutual TLS). Built at start and on each SIGHUP; a
/// connection keeps the context it was accepted with (its `SSL` holds a reference), so a
/// reload never touches connections already open.
final class TLSContext {
    fileprivate let context: OpaquePointer
    let settings: TLSSettings
    /// This OpenSSL build can hand records to the kernel, and the context asks it to
    /// (SSL_OP_ENABLE_KTLS). Whether a connection actually gets kernel TLS also depends on the
    /// kernel's `tls` module and the cipher (`TLSSession.usesKernelTLS`).
    let requestsKernelTLS: Bool
    /// The served certificate's `notAfter`, in seconds since the epoch; nil if it cannot be
    /// read. Read once, when the context is built: the warning at start and at each reload, and
    /// `snapsync_tls_certificate_expiry_timestamp_seconds`.
    private(set) var certificateNotAfter: Int?

    init(settings: TLSSettings) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError.fromQueue("SSL_CTX_new") }
        self.context = context
        self.settings = settings
        let kernelTLS = snapsync_ssl_op_enable_ktls()
        self.requestsKernelTLS = kernelTLS != 0
        // Renegotiation off (TLS 1.2; TLS 1.3 has none): a peer cannot make a write wait on a
        // handshake. An EOF without close_notify is a plain end of input, as on the plain port
        // (the protocol's frames, not TLS, say whether a message is complete).
        _ = SSL_CTX_set_options(
            context,
            snapsync_ssl_op_no_renegotiation() | snapsync_ssl_op_ignore_unexpected_eof()
                | snapsync_ssl_op_cipher_server_preference() | kernelTLS)
        // Partial writes: SSL_write returns after each record, so the flush counts what went out.
        // Moving buffer: a retried write may come from another address (the connection's copy).
        // Release buffers: an idle connection holds no 34 KiB of record buffers.
        _ = snapsync_ssl_ctx_set_mode(
            context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE) | Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER) | Int(SSL_MODE_RELEASE_BUFFERS))
        do {
            let version = settings.minimumVersion == .tls13 ? TLS1_3_VERSION : TLS1_2_VERSION
            try TLSError.require(
                snapsync_ssl_ctx_set_min_proto_version(context, version) == 1, "setting the minimum version \(settings.minimumVersion.rawValue)")
            if let ciphers = settings.ciphers {
                try TLSError.require(SSL_CTX_set_cipher_list(context, ciphers) == 1, "setting --tls-ciphers \(ciphers)")
            }
            try TLSError.require(
                SSL_CTX_use_certificate_chain_file(context, settings.certificatePath) == 1,
                "loading the certificate chain \(settings.certificatePath)")
            try TLSError.require(
                SSL_CTX_use_PrivateKey_file(context, settings.keyPath, SSL_FILETYPE_PEM) == 1,
                "loading the private key \(settings.keyPath)")
            if let certificate = SSL_CTX_get0_certificate(context), let notAfter = X509_get0_notAfter(certificate) {
                certificateNotAfter = Self.epochSeconds(notAfter)
            }
            try TLSError.require(
                SSL_CTX_check_private_key(context) == 1,
                "checking that the key \(settings.keyPath) matches the certificate \(settings.certificatePath)")
            // Sessions resumed from this context's cache must have been verified by it.
            let sessionContext = Array("snapsyncd".utf8)
            try TLSError.require(
                SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count)) == 1,
                "setting the session id context")
            if let caPath = settings.clientCAPath {
                try TLSError.require(SSL_CTX_load_verify_locations(context, caPath, nil) == 1, "loading the client CA \(caPath)")
                guard let names = SSL_load_client_CA_file(caPath) else { throw TLSError.fromQueue("reading the client CA names \(caPath)") }
                SSL_CTX_set_client_CA_list(context, names)
                SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
            }
        }
        // A throw after every stored property is set runs deinit, which frees the context.
    }

    deinit {
        SSL_CTX_free(context)
    }

    /// The subject and serial number of the certificate served, for the log.
    var certificateDescription: String {
        guard let certificate = SSL_CTX_get0_certificate(context) else { return "none" }
        return TLSSession.describe(certificate)
    }

    /// An ASN.1 time (UTCTime or GeneralizedTime, always UTC in a certificate) in seconds since
    /// the epoch: OpenSSL counts the days and seconds from the epoch to it, so no calendar
    /// arithmetic (nor the C library's `struct tm`) is done here.
    fileprivate static func epochSeconds(_ time: UnsafePointer<ASN1_TIME>) -> Int? {
        guard let epoch = ASN1_TIME_set(nil, 0) else { return nil }
        defer { ASN1_TIME_free(epoch) }
        var days: Int32 = 0
        var seconds: Int32 = 0
        guard ASN1_TIME_diff(&days, &seconds, epoch, time) == 1 else { return nil }
        return Int(days) * 86_400 + Int(seconds)
    }

    /// OpenSSL's version string (e.g. "OpenSSL 3.0.19 27 Jan 2026").
    static var libraryVersion: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }
}

/// One connection's TLS state over its non-blocking socket. OpenSSL reads and writes the socket
/// itself; each call says whether it made progress or waits for the socket (readable or
/// writable), and the connection arms its events accordingly.
final class TLSSession {
    enum Outcome: Equatable {
        /// Plaintext bytes read, or accepted for sending.
        case bytes(Int)
        /// Nothing until the socket is readable.
        case wantRead
        /// Nothing until the socket is writable.
        case wantWrite
        /// The peer closed the TLS session (close_notify, or EOF).
        case closed
    }

    private let ssl: OpaquePointer
    private(set) var isHandshakeComplete = false
    /// The connection has checked that the first byte starts a handshake.
    var hasCheckedFirstByte = false
    /// The connection has logged the handshake's end.
    var isHandshakeNoted = false

    /// Plaintext of a write that OpenSSL asked to retry (`wantWrite` or `wantRead`): it must be
    /// retried with the same bytes. Already taken out of the connection's output queue; at
    /// most one record (`TLSSession.recordSize`).
    var retryWrite: [UInt8] = []
    /// The retried write waits for the socket to be readable (TLS may need to read first).
    var writeWantsRead = false
    /// A read (the handshake) waits for the socket to be writable.
    var readWantsWrite = false
    /// The largest TLS record's plaintext: the flush hands OpenSSL at most this much per write.
    static let recordSize = 16 * 1024

    init(context: TLSContext, fd: Int32) throws(TLSError) {
        guard let ssl = SSL_new(context.context) else { throw TLSError.fromQueue("SSL_new") }
        self.ssl = ssl
        // On a throw, deinit frees `ssl` (every stored property is set).
        try TLSError.require(SSL_set_fd(ssl, fd) == 1, "SSL_set_fd")
        SSL_set_accept_state(ssl)
    }

    deinit {
        SSL_free(ssl)
    }

    /// `SSL_read`: the handshake first, then plaintext.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> Outcome {
        ERR_clear_error()
        let result = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        return try outcome(result, "SSL_read")
    }

    /// `SSL_write` of at most one record's plaintext.
    func write(_ bytes: UnsafeRawBufferPointer) throws(TLSError) -> Outcome {
        ERR_clear_error()
        let result = SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
        return try outcome(result, "SSL_write")
    }

    /// Sends close_notify, best effort: the connection is closing either way, and a socket too
    /// full for the alert ends the same as one that took it.
    func sendCloseNotify() {
        guard isHandshakeComplete else { return }
        ERR_clear_error()
        let result = SSL_shutdown(ssl)
        if result < 0 { _ = TLSError.fromQueue("SSL_shutdown") }  // emptied; nothing to do about it
    }

    /// OpenSSL holds decrypted or received bytes not yet returned by `read`: the socket may not
    /// become readable again for them.
    var hasBufferedInput: Bool { SSL_has_pending(ssl) == 1 }

    /// The kernel encrypts this connection's records (kernel TLS for sending).
    var usesKernelTLS: Bool { snapsync_ssl_uses_ktls_send(ssl) == 1 }

    var protocolVersion: String { String(cString: SSL_get_version(ssl)) }
    var cipher: String {
        guard let cipher = SSL_get_current_cipher(ssl) else { return "none" }
        return String(cString: SSL_CIPHER_get_name(cipher))
    }

    /// The client certificate's subject (mutual TLS), when one was presented.
    var peerSubject: String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        return Self.describe(certificate)
    }

    /// The client certificate OpenSSL verified in the handshake (mutual TLS): its subject in
    /// RFC 2253 form (`ClientCertificate`) and its `notAfter` in seconds since the epoch. nil
    /// when the client sent none, or the chain did not verify (the handshake then failed anyway
    /// under `--tls-client-ca`), or a field cannot be read, or the subject is empty (RFC 5280
    /// allows it beside a SAN: every such certificate would share one `sub`).
    var verifiedPeerCertificate: (subject: String, notAfter: Int)? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard SSL_get_verify_result(ssl) == X509_V_OK,
            let name = X509_get_subject_name(certificate), let subject = Self.rfc2253(name), !subject.isEmpty,
            let notAfter = X509_get0_notAfter(certificate)
        else { return nil }
        guard let seconds = TLSContext.epochSeconds(notAfter) else { return nil }
        return (subject, seconds)
    }

    /// `name` printed by OpenSSL in RFC 2253 form, UTF-8 kept (`snapsync_xn_flags_rfc2253_utf8`).
    private static func rfc2253(_ name: OpaquePointer) -> String? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, snapsync_xn_flags_rfc2253_utf8()) >= 0 else { return nil }
        let count = Int(BIO_ctrl_pending(bio))
        var bytes = [UInt8](repeating: 0, count: count)
        let read = bytes.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(count)) }
        guard read == count else { return nil }
        let subject = String(decoding: bytes, as: UTF8.self)
        // A subject OpenSSL printed with bytes that are not UTF-8 cannot be a `sub`.
        return subject.utf8.elementsEqual(bytes) ? subject : nil
    }

    /// Maps an I/O call's result to its outcome, or throws OpenSSL's reasons. Also notes the
    /// end of the handshake.
    private func outcome(_ result: Int32, _ operation: String) throws(TLSError) -> Outcome {
        let socketError = Glibc.errno
        if !isHandshakeComplete && SSL_is_init_finished(ssl) == 1 { isHandshakeComplete = true }
        if result > 0 { return .bytes(Int(result)) }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            return .wantRead
        case SSL_ERROR_WANT_WRITE:
            return .wantWrite
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        case SSL_ERROR_SYSCALL:
            // With SSL_OP_IGNORE_UNEXPECTED_EOF an EOF is ZERO_RETURN; this is a socket error.
            throw TLSError.fromQueue(operation, errno: socketError == 0 ? ECONNRESET : socketError)
        default:
            throw TLSError.fromQueue(operation)
        }
    }

    /// "subject=/CN=... serial=0A1B...".
    fileprivate static func describe(_ certificate: OpaquePointer) -> String {
        var subject = "?"
        if let name = X509_get_subject_name(certificate), let line = X509_NAME_oneline(name, nil, 0) {
            subject = String(cString: line)
            CRYPTO_free(line, #fileID, #line)
        }
        var serial = "?"
        if let number = X509_get_serialNumber(certificate), let big = ASN1_INTEGER_to_BN(number, nil) {
            if let hex = BN_bn2hex(big) {
                serial = String(cString: hex)
                CRYPTO_free(hex, #fileID, #line)
            }
            BN_free(big)
        }
        return "subject=\(subject) serial=\(serial)"
    }
}
