#ifndef SNAPSYNC_CBENCHOPENSSL_SHIM_H
#define SNAPSYNC_CBENCHOPENSSL_SHIM_H
// OpenSSL (libssl) for the fan-out generator's TLS clients (`fanout --tls`, BenchTLS.swift).
// A module of the benchmark package's own: the daemon's COpenSSL is no product of the root
// package. Only what Swift cannot import is here.
#include <openssl/ssl.h>
#include <openssl/err.h>

// Why: SSL_CTX_set_mode and SSL_CTX_set_min_proto_version are function-like macros.
static inline long snapsync_bench_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) { return (long)SSL_CTX_set_mode(ctx, mode); }
static inline int snapsync_bench_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

#endif
