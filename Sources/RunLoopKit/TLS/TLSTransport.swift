import Synchronization

/// One connection's TLS, a filter over its socket: OpenSSL's session between the socket's
/// ciphertext and the connection's plaintext, the handshake's state, and the facts the handshake
/// settled. Its calls return outcomes (`HandshakeOutcome`, `ReceiveOutcome`, and the session's
/// `Wire`); the connection acts on them (`LoopConnection+TLS.swift`).
///
/// Ciphertext in: OpenSSL reads through the session's own BIO, whose read is a `recv` from the
/// connection's socket (`SocketTransport`, as plaintext reads) straight into OpenSSL's read buffer
/// (read-ahead on: a `recv` fills the buffer, a record and more, rather than reading a header and
/// then a body), within the plaintext read's budget and input limit; OpenSSL decrypts into the
/// connection's input buffer. Ciphertext out: the BIO sends each record at once (a `send` of the
/// same `SocketTransport`) while the connection's write may go at once and nothing is queued, and
/// keeps what the socket does not take, in order, in `unsent`, whose blocks move to the
/// connection's output queue without a copy; so watermarks, backpressure and flushing work on the
/// bytes the socket takes, as for plaintext. OpenSSL never sees the descriptor.
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
final class TLSTransport: @unchecked Sendable {
    // @unchecked: `session`, `completion` and `timer` are touched on the connection's loop thread
    // only; `facts` is locked.

    let session: OpenSSLSession
    /// The socket below.
    let socket: SocketTransport
    /// The peer, for the errors' messages.
    let peer: SocketAddress
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

    /// How a step of the handshake ended.
    enum HandshakeOutcome: Equatable {
        /// The handshake is complete.
        case done
        /// More ciphertext from the peer is needed; the socket has no more now.
        case wantsInput
        /// A receive failed (ECONNRESET, ...).
        case failed(Errno)
        /// The handshake failed (OpenSSL's reason, the peer's alert, close_notify or end of stream).
        case refused(LoopError)
    }

    init(
        _ context: OpenSSLContext, serverName: String?, verifyName: String?, socket: SocketTransport,
        peer: SocketAddress
    ) throws(LoopError) {
        session = try OpenSSLSession(context, serverName: serverName, verifyName: verifyName, socket: socket)
        self.socket = socket
        self.peer = peer
        isServer = context.isServer
    }

    // MARK: Calls

    /// One step of the handshake with what the socket gives within `allowance`.
    func handshake(allowance: Int, sendingNow: Bool) -> (HandshakeOutcome, OpenSSLSession.Wire) {
        let (progress, wire) = session.handshake(allowance: allowance, sendingNow: sendingNow)
        return (handshakeOutcome(progress, wire), wire)
    }

    /// The outcome of a handshake step that ended with `progress`, having done `wire`.
    func handshakeOutcome(_ progress: OpenSSLSession.Progress, _ wire: OpenSSLSession.Wire) -> HandshakeOutcome {
        switch (progress, wire.receiveStop) {
        case (.done, _): .done
        case (.wantsInput, .failed(let failure)): .failed(failure)
        case (.wantsInput, .endOfStream):
            .refused(handshakeError("the peer closed the connection during the handshake"))
        case (.wantsInput, _): .wantsInput
        case (.closeNotify, _): .refused(handshakeError("the peer closed the TLS session during the handshake"))
        case (.failed(let reason), _): .refused(handshakeError(reason))
        }
    }

    private func handshakeError(_ reason: String) -> LoopError {
        LoopError("the TLS handshake with \(peer) failed: \(reason)")
    }

    /// Decrypts into `plaintext` what the socket gives within `allowance` (and what OpenSSL
    /// holds already). `earlier`: what the socket said earlier in the same wake-up (the
    /// handshake's step), which stands unless this call learns more.
    func receive(
        into plaintext: EventBuffer, allowance: Int, sendingNow: Bool, earlier: SocketOutcome? = nil
    ) -> (ReceiveOutcome, OpenSSLSession.Wire) {
        let (count, stop, wire) = session.decrypt(into: plaintext, allowance: allowance, sendingNow: sendingNow)
        return (receiveOutcome(count, stop, wire.receiveStop ?? earlier), wire)
    }

    /// The outcome of a read that decrypted `count` bytes and ended with `stop`, the socket
    /// having said `socket` (nil: nothing that stopped the reading).
    func receiveOutcome(_ count: Int, _ stop: OpenSSLSession.Progress, _ socket: SocketOutcome?) -> ReceiveOutcome {
        if case .failed(let failure) = socket { return .failed(failure) }
        switch stop {
        case .failed(let reason): return .refused(LoopError("TLS with \(peer) failed: \(reason)"))
        case .closeNotify: return .ended(count)
        case .done, .wantsInput: break
        }
        switch socket {
        case .endOfStream: return .ended(count)
        case .wouldBlock: return .drained(count)
        default: return .stopped(count)
        }
    }

    /// Encrypts `bytes`: OpenSSL's reason if the session refused them.
    func write(_ bytes: UnsafeRawBufferPointer, sendingNow: Bool) -> (LoopError?, OpenSSLSession.Wire) {
        let (refusal, wire) = session.encrypt(bytes, sendingNow: sendingNow)
        return (refusal.map(writeError), wire)
    }

    /// Encrypts the bytes of `buffer`, leaving it empty.
    func write(_ buffer: EventBuffer, sendingNow: Bool) -> (LoopError?, OpenSSLSession.Wire) {
        let (refusal, wire) = session.encrypt(buffer, sendingNow: sendingNow)
        return (refusal.map(writeError), wire)
    }

    private func writeError(_ reason: String) -> LoopError { LoopError("TLS with \(peer) failed: \(reason)") }

    /// Makes close_notify (once).
    func closeNotify(sendingNow: Bool) -> OpenSSLSession.Wire { session.closeNotify(sendingNow: sendingNow) }

    /// The records the socket did not take at once.
    var unsent: EventBuffer { session.unsent }

    // MARK: The handshake's end

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
