import Synchronization

/// One connection's TLS: OpenSSL's session between the socket's ciphertext and the connection's
/// plaintext, the handshake's state, and the facts the handshake settled.
///
/// Ciphertext in: OpenSSL reads through the session's own BIO, whose read is a `recv` from the
/// connection's socket straight into OpenSSL's read buffer (read-ahead on: a `recv` fills the
/// buffer, a record and more, rather than reading a header and then a body), within the plaintext
/// read's budget and input limit; OpenSSL decrypts into the connection's input buffer. Ciphertext out: the BIO sends each record at once
/// while nothing is queued for the socket, and keeps what the socket does not take, in order, in
/// `cipherOut`, whose blocks move to the connection's output queue without a copy; so watermarks,
/// backpressure and flushing work on the bytes the socket takes, as for plaintext. The BIO touches
/// the socket only inside the calls the connection prepares (`io`), with its EINTR rule and
/// SIGPIPE-free sends; an end of stream or a failure is recorded for the connection to report.
///
/// Why this BIO rather than OpenSSL's socket BIO (`SSL_set_fd`): the same copies (the kernel's
/// only) for fewer instructions, and the connection's model intact. OpenSSL's socket BIO writes
/// with `write` (SIGPIPE when the peer has gone), a write it could not finish must be repeated
/// with the same bytes outside the connection's queue, watermarks and `writev`, and reads would
/// bypass the read budget and the input limit. Each BIO's instructions per byte, and the timings
/// (docs/performance-notes.md#tls-bio).
///
/// Loop thread only, except the facts (`negotiatedProtocol`, `peerCertificateSubject`), which
/// any thread reads once the handshake is done.
final class TLSEngine: @unchecked Sendable {
    // @unchecked: `session`, `completion` and `timer` are touched on the connection's loop thread
    // only; `facts` is locked.

    let session: OpenSSLSession
    /// Set while the handshake runs; called once, with the connection or why it failed.
    var completion: ((Result<LoopConnection, LoopError>) -> Void)?
    /// Cuts a handshake that takes longer than the configuration's `handshakeTimeout`.
    var timer: LoopScheduled?
    private(set) var isHandshaking = true
    let isServer: Bool
    private let facts = Mutex<Facts?>(nil)

    struct Facts {
        var negotiatedProtocol: String?
        var peerCertificateSubject: String?
        var version: String
    }

    init(_ context: OpenSSLContext, serverName: String?, verifyName: String?) throws(LoopError) {
        session = try OpenSSLSession(context, serverName: serverName, verifyName: verifyName)
        isServer = context.isServer
    }

    /// The handshake is done: the facts are recorded, the timer goes, and the completion is
    /// handed back (to be called by the connection, last).
    func finishHandshake() -> ((Result<LoopConnection, LoopError>) -> Void)? {
        isHandshaking = false
        let settled = Facts(
            negotiatedProtocol: session.negotiatedProtocol,
            // Servers do not ask for client certificates.
            peerCertificateSubject: isServer ? nil : session.peerCertificateSubject,
            version: session.version)
        facts.withLock { $0 = settled }
        return endHandshake()
    }

    /// The handshake ended, whichever way: the timer goes, and the completion is handed back.
    func endHandshake() -> ((Result<LoopConnection, LoopError>) -> Void)? {
        isHandshaking = false
        timer?.cancel()
        timer = nil
        defer { completion = nil }
        return completion
    }

    var negotiatedProtocol: String? { facts.withLock { $0?.negotiatedProtocol } }
    var peerCertificateSubject: String? { facts.withLock { $0?.peerCertificateSubject } }
    var version: String? { facts.withLock { $0?.version } }
}
