// One connection's `SSL` and the BIO through which it reads and writes its socket's ciphertext.

internal import COpenSSL
import Glibc

/// One connection's `SSL`, reading and writing ciphertext through a BIO of RunLoopKit's own,
/// which receives and sends through the connection's `SocketTransport` (the calls plaintext
/// makes): it receives straight into OpenSSL's read buffer, and sends a record at once when the
/// call allows it and nothing is left unsent before it (see `TLSTransport` for why not OpenSSL's
/// socket BIO). The BIO touches the socket only inside the calls below, each of which says what
/// it may do there (`allowance`, `sendingNow`) and returns what it did (`Wire`). Loop thread only.
final class OpenSSLSession {
    /// Ciphertext given rather than received from the socket (the fuzzer's input): taken first.
    let cipherIn = EventBuffer()
    /// Records OpenSSL made (data, alerts, close_notify) that did not go to the socket at once,
    /// in order: the caller moves them to the connection's output queue.
    let unsent = EventBuffer()
    private let ssl: OpaquePointer
    /// The socket, or nil: none (everything goes through `cipherIn` and `unsent`).
    let socket: SocketTransport?

    /// What one call did on the socket.
    struct Wire: Equatable {
        /// Bytes received from the socket.
        var received = 0
        /// Bytes of records sent at once.
        var sent = 0
        /// Why receiving stopped, if it did: `wouldBlock` (the socket had no more: a short read,
        /// or EAGAIN), `endOfStream`, or `failed`. No further `recv` in that call.
        var receiveStop: SocketOutcome?
        /// A send failed (not EAGAIN).
        var sendFailure: Errno?
    }

    /// The call under way: what the BIO may do on the socket, and what it did.
    private struct Call {
        /// How many more bytes the BIO may receive.
        var allowance = 0
        /// Whether records may go to the socket at once.
        var sendingNow = false
        var wire = Wire()
    }
    private var call = Call()

    /// How a handshake step, or a read, ended.
    enum Progress {
        /// The handshake is complete (for a read: the input is used up).
        case done
        /// More ciphertext from the peer is needed.
        case wantsInput
        /// The peer sent close_notify (reads only).
        case closeNotify
        case failed(reason: String)
    }

    /// A session of `context`; a client verifies `verifyName` (a DNS name or an IP address, or
    /// nothing) as its context's verification says, and sends `serverName` as SNI when it is a
    /// DNS name.
    init(
        _ context: OpenSSLContext, serverName: String?, verifyName: String?, socket: SocketTransport? = nil
    ) throws(LoopError) {
        self.socket = socket
        OpenSSL.clearErrors()
        guard let ssl = SSL_new(context.raw) else { throw OpenSSL.error("the TLS session could not be made") }
        self.ssl = ssl
        guard let bio = BIO_new(OpenSSLSession.socketMethod) else {
            throw OpenSSL.error("the TLS session's BIO could not be made")
        }
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        BIO_set_init(bio, 1)
        // One BIO both ways: SSL_set_bio takes the one reference for both.
        SSL_set_bio(ssl, bio, bio)
        if context.isServer {
            SSL_set_accept_state(ssl)
            return
        }
        SSL_set_connect_state(ssl)
        if let serverName, !OpenSSLSession.isIPAddress(serverName) {
            guard rlk_ssl_set_tlsext_host_name(ssl, serverName) == 1 else {
                throw OpenSSL.error("the server name \(serverName) could not be set")
            }
        }
        if context.verification == .fullVerification, let verifyName {
            let set =
                OpenSSLSession.isIPAddress(verifyName)
                ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), verifyName) : SSL_set1_host(ssl, verifyName)
            guard set == 1 else { throw OpenSSL.error("the name to verify, \(verifyName), could not be set") }
        }
    }

    deinit { SSL_free(ssl) }

    private static func isIPAddress(_ name: String) -> Bool {
        var storage = in6_addr()
        return inet_pton(AF_INET, name, &storage) == 1 || inet_pton(AF_INET6, name, &storage) == 1
    }

    /// Runs `body` as one call: the BIO may receive up to `allowance` bytes and, if `sendingNow`,
    /// send records at once. Returns what `body` gave and what the call did on the socket.
    private func perform<R>(allowance: Int, sendingNow: Bool, _ body: () -> R) -> (R, Wire) {
        call = Call(allowance: allowance, sendingNow: sendingNow)
        let result = body()
        let wire = call.wire
        // Outside of a call the BIO never touches the socket.
        call = Call()
        return (result, wire)
    }

    /// Takes the handshake as far as the ciphertext in `cipherIn` and what the socket gives within
    /// `allowance` allow.
    func handshake(allowance: Int = 0, sendingNow: Bool = false) -> (Progress, Wire) {
        perform(allowance: allowance, sendingNow: sendingNow) {
            OpenSSL.clearErrors()
            let result = SSL_do_handshake(ssl)
            if result == 1 { return .done }
            return progress(after: result)
        }
    }

    /// Decrypts into `plaintext` what `cipherIn` holds and what the socket gives within
    /// `allowance`, all of it (a partial record waits for the rest). Returns the count decrypted
    /// and why it stopped.
    func decrypt(
        into plaintext: EventBuffer, allowance: Int = 0, sendingNow: Bool = false
    ) -> (count: Int, stop: Progress, wire: Wire) {
        let ((count, stop), wire) = perform(allowance: allowance, sendingNow: sendingNow) { decrypt(into: plaintext) }
        return (count, stop, wire)
    }

    private func decrypt(into plaintext: EventBuffer) -> (Int, Progress) {
        var total = 0
        while true {
            // Nothing left to decrypt: no space is reserved for a read that would find nothing (a
            // block of the input buffer made and dropped per request, otherwise).
            if cipherIn.count == 0 && !mayReceive && SSL_has_pending(ssl) == 0 { return (total, .wantsInput) }
            OpenSSL.clearErrors()
            var result: Int32 = 0
            _ = plaintext.append(maxLength: OpenSSLSession.recordSize) { space in
                result = SSL_read(ssl, space.baseAddress, Int32(space.count))
                return Int(result)
            }
            if result > 0 {
                total += Int(result)
                continue
            }
            return (total, progress(after: result))
        }
    }

    /// Encrypts `bytes` (sent at once if `sendingNow` allows, else kept in `unsent`): OpenSSL's
    /// reason if the session refused them.
    func encrypt(_ bytes: UnsafeRawBufferPointer, sendingNow: Bool) -> (String?, Wire) {
        perform(allowance: 0, sendingNow: sendingNow) { encrypt(bytes) }
    }

    /// `encrypt` of the bytes of `buffer`, block by block, leaving it empty (unless refused).
    func encrypt(_ buffer: EventBuffer, sendingNow: Bool) -> (String?, Wire) {
        perform(allowance: 0, sendingNow: sendingNow) {
            while buffer.count > 0 {
                let (length, refusal) = buffer.withFirstBlock { ($0.count, encrypt($0)) }
                if let refusal { return refusal }
                buffer.drain(length)
            }
            return nil
        }
    }

    private func encrypt(_ bytes: UnsafeRawBufferPointer) -> String? {
        var rest = bytes
        while rest.count > 0 {
            OpenSSL.clearErrors()
            let result = SSL_write(ssl, rest.baseAddress, Int32(min(rest.count, Int(Int32.max))))
            guard result > 0 else {
                if case .failed(let reason) = progress(after: result) { return reason }
                return "the TLS session refused to write"
            }
            rest = UnsafeRawBufferPointer(rebasing: rest[Int(result)...])
        }
        return nil
    }

    /// Makes close_notify (once; later calls do nothing), sent at once if `sendingNow` allows.
    func closeNotify(sendingNow: Bool) -> Wire {
        perform(allowance: 0, sendingNow: sendingNow) {
            guard SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN == 0 else { return }
            OpenSSL.clearErrors()
            _ = SSL_shutdown(ssl)
            OpenSSL.clearErrors()
        }.1
    }

    /// The most plaintext one TLS record carries.
    static let recordSize = 16 * 1024

    private func progress(after result: Int32) -> Progress {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantsInput
        case SSL_ERROR_ZERO_RETURN: return .closeNotify
        default:
            var reason = OpenSSL.takeReasons() ?? "the TLS session failed"
            let verified = SSL_get_verify_result(ssl)
            if verified != X509_V_OK, let text = X509_verify_cert_error_string(verified) {
                reason += " (\(String(cString: text)))"
            }
            return .failed(reason: reason)
        }
    }

    // MARK: Facts

    /// The protocol ALPN chose, if any.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// `TLSv1.3`, `TLSv1.2`.
    var version: String { String(cString: SSL_get_version(ssl)) }

    /// The peer certificate's subject, RFC 2253 style (`CN=example.com,O=Example`), if the peer
    /// presented one.
    var peerCertificateSubject: String? {
        guard let certificate = rlk_ssl_get_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard let name = X509_get_subject_name(certificate), let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard rlk_x509_name_print_rfc2253(bio, name) >= 0 else { return nil }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = rlk_bio_get_mem_data(bio, &data)
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    // MARK: The BIO over the socket

    /// Whether a `recv` may be made now.
    private var mayReceive: Bool {
        socket != nil && call.allowance > 0 && call.wire.receiveStop == nil
    }

    /// OpenSSL wants up to `space.count` bytes: from `cipherIn` if it holds any, else from the
    /// socket within the allowance. 0 for nothing now (OpenSSL is told to retry: an end of
    /// stream or a failure is the call's to report, in its `Wire`).
    private func receive(into space: UnsafeMutableRawBufferPointer) -> Int {
        if cipherIn.count > 0 { return cipherIn.remove(into: space) }
        guard mayReceive, let socket else { return 0 }
        let asked = min(space.count, call.allowance)
        let outcome = socket.receive(into: UnsafeMutableRawBufferPointer(rebasing: space[..<asked]))
        guard case .done(let count) = outcome else {
            call.wire.receiveStop = outcome
            return 0
        }
        call.allowance -= count
        call.wire.received += count
        // Short of what was asked: the socket has no more now, and another `recv` would only
        // say so.
        if count < asked { call.wire.receiveStop = .wouldBlock }
        return count
    }

    /// OpenSSL made ciphertext: sent at once while the call allows it and nothing is unsent
    /// before it (what the socket does not take is kept, in order, in `unsent`), kept otherwise.
    private func send(_ bytes: UnsafeRawBufferPointer) {
        var rest = bytes
        if let socket, call.sendingNow, unsent.count == 0, call.wire.sendFailure == nil {
            switch socket.send(bytes) {
            case .done(let count):
                call.wire.sent += count
                rest = UnsafeRawBufferPointer(rebasing: bytes[count...])
            case .failed(let failure):
                call.wire.sendFailure = failure
                return
            case .wouldBlock, .endOfStream:
                break
            }
        }
        if rest.count > 0 { unsent.append(rest) }
    }

    /// Reads and writes as `receive` and `send` do; one method, made once, for every session.
    // nonisolated(unsafe): made once (a lazy global is initialized under a lock), then only read.
    nonisolated(unsafe) private static let socketMethod: OpaquePointer = {
        guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "RunLoopKit socket") else {
            fatalError("RunLoopKit: BIO_meth_new failed (out of memory)")
        }
        _ = BIO_meth_set_read(method) { bio, data, length in
            guard let bio, let data, length > 0 else { return 0 }
            rlk_bio_clear_retry_flags(bio)
            let read = session(of: bio).receive(into: UnsafeMutableRawBufferPointer(start: data, count: Int(length)))
            guard read > 0 else {
                rlk_bio_set_retry_read(bio)
                return -1
            }
            return Int32(read)
        }
        _ = BIO_meth_set_write(method) { bio, data, length in
            guard let bio, let data, length > 0 else { return 0 }
            rlk_bio_clear_retry_flags(bio)
            session(of: bio).send(UnsafeRawBufferPointer(start: data, count: Int(length)))
            return length
        }
        _ = BIO_meth_set_ctrl(method) { bio, command, _, _ in
            guard let bio else { return 0 }
            switch command {
            case BIO_CTRL_FLUSH: return 1
            case BIO_CTRL_PENDING: return session(of: bio).cipherIn.count
            default: return 0
            }
        }
        return method
    }()

    private static func session(of bio: OpaquePointer) -> OpenSSLSession {
        Unmanaged<OpenSSLSession>.fromOpaque(BIO_get_data(bio)).takeUnretainedValue()
    }
}
