#ifndef SNAPSYNC_COPENSSL_SHIM_H
#define SNAPSYNC_COPENSSL_SHIM_H
// OpenSSL (libssl, libcrypto) for the daemon's TLS listener: only Sources/SnapSyncServer/TLS/
// TLS.swift imports this module. Everything Swift imports as is (SSL_CTX_new, SSL_read,
// SSL_get_error, SSL_ERROR_WANT_READ, TLS1_2_VERSION, ...) is used directly there; only what
// Swift cannot import is here.
#include <sys/types.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/bio.h>

// Why: SSL_CTX_set_min_proto_version is a function-like macro (SSL_CTX_ctrl with
// SSL_CTRL_SET_MIN_PROTO_VERSION). Returns 1 on success, 0 on failure, as the macro does.
static inline int snapsync_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

// Why: SSL_CTX_set_mode is a function-like macro (SSL_CTX_ctrl with SSL_CTRL_MODE). Returns the
// new mode bit mask.
static inline long snapsync_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) {
    return (long)SSL_CTX_set_mode(ctx, mode);
}

// Why: the SSL_OP_* options are built with SSL_OP_BIT(n), a function-like macro, so Swift
// imports none of them. These are the options the daemon sets.
static inline uint64_t snapsync_ssl_op_no_renegotiation(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t snapsync_ssl_op_ignore_unexpected_eof(void) { return SSL_OP_IGNORE_UNEXPECTED_EOF; }
static inline uint64_t snapsync_ssl_op_cipher_server_preference(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }

// Why: SSL_OP_ENABLE_KTLS exists only when OpenSSL was built with kernel TLS; 0 means "not
// offered by this build" (the option is then simply not set).
static inline uint64_t snapsync_ssl_op_enable_ktls(void) {
#if defined(SSL_OP_ENABLE_KTLS) && !defined(OPENSSL_NO_KTLS)
    return SSL_OP_ENABLE_KTLS;
#else
    return 0;
#endif
}

// Why: BIO_get_ktls_send is a function-like macro, and exists only with kernel TLS. 1 when the
// connection's records are encrypted by the kernel, 0 when by OpenSSL in user space.
static inline int snapsync_ssl_uses_ktls_send(SSL *ssl) {
#if defined(SSL_OP_ENABLE_KTLS) && !defined(OPENSSL_NO_KTLS)
    return BIO_get_ktls_send(SSL_get_wbio(ssl)) ? 1 : 0;
#else
    (void)ssl;
    return 0;
#endif
}

// Why: XN_FLAG_RFC2253 and ASN1_STRFLGS_ESC_MSB are macros built from other macros. These are
// the flags a client certificate's subject is printed with: RFC 2253 (most specific RDN first,
// comma-separated, special characters escaped), but bytes above 0x7f are left as UTF-8 rather
// than escaped one by one (\XX), so a subject reads as RFC 4514 writes it.
static inline unsigned long snapsync_xn_flags_rfc2253_utf8(void) { return XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB; }

#endif
