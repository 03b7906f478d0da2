// A certificate chain and its private key, read from PEM files and installed in a context.

internal import COpenSSL
import Glibc

/// A certificate chain and its private key, read from PEM files. The key is held as OpenSSL's
/// parsed object, never as text, and never appears in a message.
final class OpenSSLCredentials: @unchecked Sendable {
    // @unchecked: immutable after `init`; OpenSSL's objects are only read (and reference counted
    // under its own locks) once made.
    private let certificates: [OpaquePointer]
    private let key: OpaquePointer

    init(certificateChain chainPath: String, privateKey keyPath: String) throws(LoopError) {
        OpenSSL.clearErrors()
        let chain = try OpenSSLCredentials.withFile(chainPath, "the certificate chain") { bio in
            var certificates: [OpaquePointer] = []
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) { certificates.append(certificate) }
            // The loop ends at the end of the file, which OpenSSL queues as an error too.
            ERR_clear_error()
            return certificates
        }
        guard !chain.isEmpty else {
            throw LoopError("the certificate chain \(chainPath) holds no PEM certificate")
        }
        let key = try OpenSSLCredentials.withFile(keyPath, "the private key") { bio in
            // A key protected by a passphrase is refused rather than prompted for on the terminal.
            PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else {
            for certificate in chain { X509_free(certificate) }
            throw OpenSSL.error("the private key \(keyPath) could not be read", fallback: "no PEM private key")
        }
        certificates = chain
        self.key = key
    }

    deinit {
        for certificate in certificates { X509_free(certificate) }
        EVP_PKEY_free(key)
    }

    /// Opens `path` for OpenSSL's PEM readers; a missing or unreadable file throws with its errno.
    private static func withFile<R>(_ path: String, _ what: String, _ body: (OpaquePointer) -> R) throws(LoopError)
        -> R
    {
        errno = 0
        guard let bio = BIO_new_file(path, "r") else {
            let code = errno
            ERR_clear_error()
            throw LoopError(
                "\(what) \(path) could not be opened: \(String(cString: strerror(code)))",
                systemError: code == 0 ? nil : code)
        }
        defer { BIO_free(bio) }
        return body(bio)
    }

    /// Makes `context` present the chain and prove it holds the key.
    func install(in context: OpaquePointer) throws(LoopError) {
        OpenSSL.clearErrors()
        guard SSL_CTX_use_certificate(context, certificates[0]) == 1 else {
            throw OpenSSL.error("the certificate could not be used")
        }
        for intermediate in certificates.dropFirst() where rlk_ssl_ctx_add1_chain_cert(context, intermediate) != 1 {
            throw OpenSSL.error("an intermediate certificate could not be used")
        }
        guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
            throw OpenSSL.error("the private key does not fit the certificate")
        }
    }
}
