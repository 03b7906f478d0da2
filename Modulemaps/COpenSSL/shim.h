#ifndef RUNLOOPKIT_COPENSSL_SHIM_H
#define RUNLOOPKIT_COPENSSL_SHIM_H

// OpenSSL 3 (Debian's libssl-dev), and only OpenSSL. Only Sources/RunLoopKit/TLS/OpenSSL.swift
// imports it.

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

// Function-like macros over SSL_ctrl, SSL_CTX_ctrl and BIO_ctrl, and option bits built with
// casts, do not import into Swift: each one it uses is a function here.

static inline int rlk_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

/// Renegotiation refused (either side), no compression, and a server picks its own cipher order.
static inline void rlk_ssl_ctx_set_hardening(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
}

/// Buffers are freed while a connection is idle (a server holds thousands of them).
static inline void rlk_ssl_ctx_set_release_buffers(SSL_CTX *ctx) {
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
}

/// Reads ask for as much as the read buffer holds (a record and its overhead), not a record's
/// header and then its body.
static inline void rlk_ssl_ctx_set_read_ahead(SSL_CTX *ctx) {
    SSL_CTX_set_read_ahead(ctx, 1);
}

static inline int rlk_ssl_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

static inline int rlk_ssl_ctx_add1_chain_cert(SSL_CTX *ctx, X509 *certificate) {
    return (int)SSL_CTX_add1_chain_cert(ctx, certificate);
}

static inline void rlk_bio_set_retry_read(BIO *bio) {
    BIO_set_retry_read(bio);
}

static inline void rlk_bio_clear_retry_flags(BIO *bio) {
    BIO_clear_retry_flags(bio);
}

static inline X509 *rlk_ssl_get_peer_certificate(const SSL *ssl) {
    return SSL_get1_peer_certificate(ssl);
}

/// The name on one line, RFC 2253 style (`CN=localhost,O=Example`), written to `out`.
static inline int rlk_x509_name_print_rfc2253(BIO *out, const X509_NAME *name) {
    return X509_NAME_print_ex(out, name, 0, XN_FLAG_RFC2253);
}

static inline long rlk_bio_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

/// The server's ALPN choice: the first of its own protocols (`arg`: a 2-byte little-endian length,
/// then the list in wire format) that the client offers; none (no ALPN in the answer) otherwise.
static int rlk_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                           const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    const unsigned char *server = (const unsigned char *)arg;
    unsigned int length = (unsigned int)server[0] | ((unsigned int)server[1] << 8);
    unsigned char *chosen = NULL;
    if (SSL_select_next_proto(&chosen, outlen, server + 2, length, in, inlen) != OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

static inline void rlk_ssl_ctx_set_alpn_select(SSL_CTX *ctx, const unsigned char *protocols) {
    SSL_CTX_set_alpn_select_cb(ctx, rlk_alpn_select, (void *)protocols);
}

#endif
