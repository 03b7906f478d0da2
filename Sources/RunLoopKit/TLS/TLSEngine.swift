import Synchronization

/// One connection's TLS: OpenSSL's session between the socket's ciphertext and the connection's
/// plaintext, the handshake's state, and the facts the handshake settled.
///
/// Ciphertext in: the connection reads the socket into `cipherIn` (readv into libevent's buffer),
/// and OpenSSL decrypts from it straight into the connection's input buffer. Ciphertext out:
/// OpenSSL's records land in `cipherOut`, whose blocks move to the connection's output queue
/// without a copy (or go to the socket at once), so watermarks, backpressure and flushing work on
/// the bytes the socket takes, as for plaintext. The session never touches the descriptor: the
/// connection's reads and writes, EINTR rule and SIGPIPE-free sends stay the only ones.
///
/// Why buffers rather than OpenSSL on the socket (`SSL_set_fd`): measured with
/// scripts/tls-bio-bench.sh (1 GiB, or 64 MiB under callgrind, one way over loopback TCP, TLS 1.3,
/// AES-256-GCM, 16 KiB writes), OpenSSL on the socket costs 8.34 instructions a byte, over
/// libevent's buffers (this engine's BIO) 10.00, over OpenSSL's own memory BIOs 14.41
/// (`CALLGRIND=1 MEBIBYTES=64 scripts/tls-bio-bench.sh`); timed, 7 alternating runs of 512 MiB on
/// the shared 2-core machine (load 8-10) gave medians of 0.285, 0.206 and 0.293 GB/s, spreads
/// 0.25-0.41, 0.16-0.25 and 0.25-0.36 (`ROUNDS=7 MEBIBYTES=512 scripts/tls-bio-bench.sh`). The
/// socket is 17% fewer instructions (two copies fewer: the ciphertext into and out of the
/// buffers), but OpenSSL's socket BIO writes with `write` (SIGPIPE when the peer has gone) and a
/// write it could not finish must be repeated with the same bytes, outside the connection's queue,
/// watermarks and writev: so the buffers stay, and the two copies are their price.
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
