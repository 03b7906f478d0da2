// One `SSL_CTX`: the trust roots, certificate, versions and ALPN a configuration's connections share.

internal import COpenSSL
import Glibc

/// One `SSL_CTX`: what every connection of a configuration shares (trust roots, certificate,
/// versions, ALPN). Immutable once made; any thread.
final class OpenSSLContext: @unchecked Sendable {
    // @unchecked: the SSL_CTX is not changed after `init`, and OpenSSL makes sessions from a
    // shared context on any thread.
    let raw: OpaquePointer
    let isServer: Bool
    let verification: TLSVerification
    /// The server's ALPN list for `rlk_alpn_select` (its length, then the wire format).
    private let serverProtocols: UnsafeMutableBufferPointer<UInt8>?

    init(_ configuration: TLSConfiguration) throws(LoopError) {
        OpenSSL.clearErrors()
        let isServer = configuration.credentials != nil
        guard let raw = SSL_CTX_new(isServer ? TLS_server_method() : TLS_client_method()) else {
            throw OpenSSL.error("the TLS context could not be made")
        }
        self.raw = raw
        self.isServer = isServer
        verification = configuration.certificateVerification
        let wire = OpenSSLContext.wireFormat(configuration.applicationProtocols)
        if isServer && !wire.isEmpty {
            let stored = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: wire.count + 2)
            stored[0] = UInt8(wire.count & 0xff)
            stored[1] = UInt8(wire.count >> 8)
            _ = UnsafeMutableBufferPointer(rebasing: stored[2...]).initialize(from: wire)
            serverProtocols = stored
        } else {
            serverProtocols = nil
        }

        let minimum = configuration.minimumVersion == .v1_3 ? TLS1_3_VERSION : TLS1_2_VERSION
        guard rlk_ssl_ctx_set_min_proto_version(raw, minimum) == 1 else {
            throw OpenSSL.error("the minimum TLS version could not be set")
        }
        rlk_ssl_ctx_set_hardening(raw)
        rlk_ssl_ctx_set_release_buffers(raw)
        // OpenSSL's own read buffer size (a record and its overhead): a 64 KiB one cost more
        // instructions a byte (docs/performance-notes.md#tls-bio).
        rlk_ssl_ctx_set_read_ahead(raw)
        if let credentials = configuration.credentials {
            try credentials.install(in: raw)
            // Clients are not asked for certificates.
            SSL_CTX_set_verify(raw, SSL_VERIFY_NONE, nil)
            if let serverProtocols { rlk_ssl_ctx_set_alpn_select(raw, serverProtocols.baseAddress) }
        } else {
            try OpenSSLContext.loadTrustRoots(configuration.trustRoots, into: raw)
            SSL_CTX_set_verify(
                raw, configuration.certificateVerification == .none ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nil)
            if !wire.isEmpty {
                // 0 is success here.
                guard SSL_CTX_set_alpn_protos(raw, wire, UInt32(wire.count)) == 0 else {
                    throw OpenSSL.error("the application protocols could not be set")
                }
            }
        }
    }

    deinit {
        SSL_CTX_free(raw)
        serverProtocols?.deallocate()
    }

    /// ALPN's wire format: each name led by its length. An empty name, or one over 255 bytes, is
    /// a programmer error.
    private static func wireFormat(_ protocols: [String]) -> [UInt8] {
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            precondition(
                (1...255).contains(bytes.count),
                "RunLoopKit: an application protocol name needs 1 to 255 bytes, not \(bytes.count) (\(name))")
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        precondition(wire.count <= 0xffff, "RunLoopKit: the application protocols take more than 65,535 bytes")
        return wire
    }

    private static func loadTrustRoots(_ roots: TLSTrustRoots, into context: OpaquePointer) throws(LoopError) {
        switch roots {
        case .system:
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw OpenSSL.error("the system's trust roots could not be loaded")
            }
        case .file(let path):
            guard SSL_CTX_load_verify_locations(context, path, nil) == 1 else {
                throw OpenSSL.error("the trust roots \(path) could not be loaded")
            }
        case .pem(let text):
            let store = SSL_CTX_get_cert_store(context)
            let bytes = Array(text.utf8)
            let added = bytes.withUnsafeBytes { raw -> Int in
                guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return 0 }
                defer { BIO_free(bio) }
                var added = 0
                while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                    if X509_STORE_add_cert(store, certificate) == 1 { added += 1 }
                    X509_free(certificate)
                }
                return added
            }
            ERR_clear_error()
            guard added > 0 else { throw LoopError("the trust roots given as PEM hold no certificate") }
        }
    }
}
