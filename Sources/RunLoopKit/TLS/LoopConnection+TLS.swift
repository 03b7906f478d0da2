import Glibc

// A TLS connection is a LoopConnection whose bytes pass through its `TLSEngine`: reads decrypt
// into the input buffer (`readTLSInput`, in place of the plaintext read), writes encrypt into the
// output queue (`queueTLSOutput`), and the changes that end this side's stream send close_notify
// first (`tlsWillApply`). Everything else (events, watermarks, backpressure, timeouts, modes,
// async calls) is the plaintext connection's own.

/// What a connection needs to start its handshake once TCP is connected.
struct TLSStart: Sendable {
    let context: OpenSSLContext
    let handshakeTimeout: Duration
    let serverName: String?

    /// For a client (`connect`), or a server (a listener): the other kind of configuration is a
    /// programmer error.
    init(_ configuration: TLSConfiguration, server: Bool) throws(LoopError) {
        precondition(
            configuration.isServer == server,
            server
                ? "RunLoopKit: LoopListener(tls:) needs a server configuration (TLSConfiguration.server), not a client's"
                : "RunLoopKit: connect(tls:) needs a client configuration (TLSConfiguration.client), not a server's")
        context = try configuration.context()
        handshakeTimeout = configuration.handshakeTimeout
        serverName = configuration.serverName
    }
}

extension LoopConnection {
    // MARK: Facts

    /// Whether the connection speaks TLS (it was accepted by a TLS listener, or connected with a
    /// TLS configuration).
    ///
    /// Any thread.
    public var isTLS: Bool { tlsSlot.load() != nil }

    /// The application protocol ALPN settled on (`"http/1.1"`, `"h2"`), or nil: no TLS, or no
    /// protocol both sides named.
    ///
    /// Any thread.
    public var negotiatedProtocol: String? { tlsSlot.load()?.negotiatedProtocol }

    /// On a client, the subject of the server's certificate, RFC 2253 style
    /// (`CN=example.com,O=Example`); nil without TLS, and on the server side (clients are not
    /// asked for certificates).
    ///
    /// Any thread.
    public var peerCertificateSubject: String? { tlsSlot.load()?.peerCertificateSubject }

    /// The TLS version spoken (`"TLSv1.3"`, `"TLSv1.2"`), or nil without TLS.
    ///
    /// Any thread.
    public var tlsVersion: String? { tlsSlot.load()?.version }

    // MARK: Connecting

    /// Connects to `address` and completes a TLS handshake as `tls` says; `completion` runs on
    /// `loop`'s thread, in `modes`, with the connection (already in `modes`) once the handshake
    /// has succeeded, or with a `LoopError`: TCP's (`ECONNREFUSED`, `ETIMEDOUT` when `timeout`
    /// passed first), the handshake's (OpenSSL's reason: `certificate verify failed
    /// (certificate has expired)`, `tlsv1 alert protocol version`, ...), or `ETIMEDOUT` when
    /// `tls.handshakeTimeout` passed first. A failed handshake closes the socket; nothing falls
    /// back to plaintext.
    ///
    /// Any thread. A server configuration, a timeout that is not positive or an empty `modes` is a
    /// programmer error.
    public static func connect(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode] = [.common],
        timeout: Duration = .seconds(30), tls: TLSConfiguration,
        _ completion: sending @escaping (Result<LoopConnection, LoopError>) -> Void
    ) {
        let box = Unchecked(completion)
        let start: TLSStart
        do {
            start = try TLSStart(tls, server: false)
        } catch {
            // Reported on a pass of the loop, as every outcome is.
            if !loop.perform(inModes: modes, { box.value(.failure(error)) }) { box.value(.failure(error)) }
            return
        }
        connect(to: address, on: loop, inModes: modes, timeout: timeout) { result in
            switch result {
            case .failure(let error): box.value(.failure(error))
            case .success(let connection): connection.startTLS(start, box.value)
            }
        }
    }

    /// Connects to `address`, completes a TLS handshake as `tls` says, and returns the connection,
    /// served by `loop` in `modes`.
    ///
    /// Any thread or task. Throws a `LoopError` as the completion form reports it. Cancelling the
    /// calling task ends the attempt (connecting or handshaking) within one pass of the loop in
    /// `modes`: its socket is closed and this throws `CancellationError`. An attempt whose
    /// handshake succeeded before the cancellation reached the loop returns its connection.
    public static func connect(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode] = [.common],
        timeout: Duration = .seconds(30), tls: TLSConfiguration
    ) async throws -> LoopConnection {
        let start = try TLSStart(tls, server: false)
        return try await connect(to: address, on: loop, inModes: modes, timeout: timeout, startingTLS: start)
    }

    /// The completion `startConnecting` gets from an awaited connect: with `start`, a connection
    /// goes on to its handshake (unless the task was cancelled meanwhile, which closes it) and
    /// `finish` gets its outcome; without, `finish` itself.
    static func handshaking(
        _ start: TLSStart?, _ attempt: ConnectAttempt,
        _ finish: @escaping (Result<LoopConnection, LoopError>) -> Void
    ) -> (Result<LoopConnection, LoopError>) -> Void {
        guard let start else { return finish }
        return { result in
            guard case .success(let connection) = result else { return finish(result) }
            guard !attempt.flag.isCancelled else {
                connection.apply(.aborted)
                return finish(.failure(LoopError("connecting to \(connection.remoteAddress) was cancelled")))
            }
            // Kept for a cancellation while the handshake runs.
            attempt.connection = connection
            connection.startTLS(start, finish)
        }
    }

    // MARK: Handshake (loop thread)

    /// Starts the handshake of a connected socket: `completion` gets the connection once it has
    /// succeeded, or why it failed (the connection is closed then). A client sends its first
    /// flight now.
    func startTLS(_ start: TLSStart, _ completion: @escaping (Result<LoopConnection, LoopError>) -> Void) {
        startTLS(start.context, handshakeTimeout: start.handshakeTimeout, serverName: start.serverName, completion)
    }

    /// `startTLS(_:_:)` for either side: `serverName` is a client's (nil for a server).
    func startTLS(
        _ context: OpenSSLContext, handshakeTimeout: Duration, serverName: String?,
        _ completion: @escaping (Result<LoopConnection, LoopError>) -> Void
    ) {
        assertOnLoopThread()
        let engine: TLSEngine
        do {
            engine = try TLSEngine(
                context, serverName: serverName, verifyName: context.isServer ? nil : serverName ?? remoteAddress.host)
        } catch {
            apply(.failed(error))
            completion(.failure(error))
            return
        }
        engine.session.socket = fileDescriptor
        _ = tlsSlot.storeIfNil(engine)
        engine.completion = completion
        // Until the handshake is done, a close for any reason (reset, end of stream, timeout,
        // cancellation) is the handshake's failure. The accept handler or the connect
        // completion sets the application's handler afterwards.
        eventHandler = { connection, event in
            guard case .closed(let error) = event, let completion = connection.tlsEngine?.endHandshake() else {
                return
            }
            completion(
                .failure(
                    error ?? LoopError("the connection to \(connection.remoteAddress) closed during the TLS handshake"))
            )
        }
        engine.timer = loop.schedule(after: handshakeTimeout, inModes: postingModes) { [self] in
            guard tlsEngine?.isHandshaking == true else { return }
            apply(
                .failed(
                    LoopError(
                        "the TLS handshake with \(remoteAddress) did not finish within \(handshakeTimeout)",
                        systemError: ETIMEDOUT)))
        }
        if !context.isServer {
            prepareToSend(engine)
            _ = advanceHandshake(engine)
        }
    }

    /// One step of the handshake with the ciphertext read so far; true once it has succeeded and
    /// the completion has run with the connection still open.
    private func advanceHandshake(_ engine: TLSEngine) -> Bool {
        switch engine.session.handshake() {
        case .done:
            queueTLSRecords(engine)
            guard !isClosed else { return false }
            let completion = engine.finishHandshake()
            eventHandler = nil
            completion?(.success(self))
            return !isClosed
        case .wantsInput:
            queueTLSRecords(engine)
            return false
        case .closeNotify:
            handshakeFailed(engine, "the peer closed the TLS session during the handshake")
            return false
        case .failed(let reason):
            handshakeFailed(engine, reason)
            return false
        }
    }

    /// Closes the connection with `reason`: its alert goes to the peer if the socket takes it at
    /// once, and the completion learns why.
    private func handshakeFailed(_ engine: TLSEngine, _ reason: String) {
        let error = LoopError("the TLS handshake with \(remoteAddress) failed: \(reason)")
        _ = engine.session.cipherOut.send(to: fileDescriptor)
        let completion = engine.endHandshake()
        eventHandler = nil
        apply(.failed(error))
        completion?(.failure(error))
    }

    // MARK: Reading (loop thread; in place of the plaintext read)

    /// Lets the session receive the plaintext read's budget per wake-up (while the input is below
    /// its limit), takes the handshake on, then decrypts into the input buffer and delivers. The
    /// peer's close_notify, or its end of stream, ends the input as a plaintext end of stream
    /// does; during the handshake either fails it.
    func readTLSInput(_ engine: TLSEngine) {
        guard delivery.readable() else { return }
        let session = engine.session
        let allowance =
            input.count < currentInputLimit ? LoopConnection.readsPerWakeUp * LoopConnection.readChunk : 0
        session.io.allowance = allowance
        session.io.received = 0
        session.io.drained = false
        session.io.ended = false
        session.io.receiveFailure = nil
        prepareToSend(engine)
        if engine.isHandshaking {
            guard advanceHandshake(engine) else {
                session.io.allowance = 0
                guard !isClosed else { return }
                if let failure = session.io.receiveFailure {
                    fail("read from \(remoteAddress)", failure)
                } else if session.io.ended {
                    handshakeFailed(engine, "the peer closed the connection during the handshake")
                }
                return
            }
        }
        prepareToSend(engine)
        let (count, stop) = input.withUnique { session.decrypt(into: $0) }
        // Outside of this call the session never touches the socket.
        session.io.allowance = 0
        if session.io.received > 0 { lastActivity = LoopConnection.coarseNow }
        // Reading may have made records too (TLS 1.3 key updates, alerts).
        queueTLSRecords(engine)
        guard !isClosed else { return }
        if let failure = session.io.receiveFailure {
            fail("read from \(remoteAddress)", failure)
            return
        }
        if case .failed(let reason) = stop {
            apply(.failed(LoopError("TLS with \(remoteAddress) failed: \(reason)")))
            return
        }
        if count > 0 { deliverInput() }
        guard !isClosed else { return }
        if case .closeNotify = stop {
            peerDidClose()
        } else if session.io.ended {
            peerDidClose()
        }
    }

    // MARK: Writing (loop thread; in place of queueing plaintext)

    /// Encrypts `bytes` and queues the records.
    func queueTLSOutput(_ bytes: UnsafeRawBufferPointer, _ engine: TLSEngine) {
        guard acceptsOutput, bytes.count > 0, !engine.isHandshaking else { return }
        prepareToSend(engine)
        if let reason = engine.session.encrypt(bytes) {
            apply(.failed(LoopError("TLS with \(remoteAddress) failed: \(reason)")))
            return
        }
        queueTLSRecords(engine)
    }

    /// Encrypts the bytes of `buffer`, block by block, leaving it empty, and queues the records.
    func queueTLSOutput(_ buffer: EventBuffer, _ engine: TLSEngine) {
        guard acceptsOutput, buffer.count > 0, !engine.isHandshaking else { return }
        prepareToSend(engine)
        while buffer.count > 0 {
            let (length, failure) = buffer.withFirstBlock { ($0.count, engine.session.encrypt($0)) }
            if let failure {
                apply(.failed(LoopError("TLS with \(remoteAddress) failed: \(failure)")))
                return
            }
            buffer.drain(length)
        }
        queueTLSRecords(engine)
    }

    /// Before a session call that may make records: they may go to the socket at once only while
    /// nothing is queued for it (and only until `queueTLSRecords` takes them).
    private func prepareToSend(_ engine: TLSEngine) {
        engine.session.io.sendsAtOnce = queuedBytes == 0 && !isClosed
        engine.session.io.sent = 0
    }

    /// After a session call: a failed send fails the connection; what the socket did not take goes
    /// to the output queue (sent first if nothing waits there); what it took counts as activity
    /// and as a change of the output, as a plaintext send does.
    private func queueTLSRecords(_ engine: TLSEngine) {
        let session = engine.session
        session.io.sendsAtOnce = false
        if let failure = session.io.sendFailure {
            session.io.sendFailure = nil
            fail("send to \(remoteAddress)", failure)
            return
        }
        let sent = session.io.sent
        session.io.sent = 0
        if sent > 0 { lastActivity = LoopConnection.coarseNow }
        if session.cipherOut.count > 0 {
            queueOutput(session.cipherOut)
        } else if sent > 0 {
            outputDidChange()
        }
    }

    // MARK: Closing (loop thread; before the lifecycle changes)

    /// A change that ends this side's stream (`shutdownOutput()`, `close()`, or the peer's end
    /// without half-closure) queues close_notify first, so that the peer reads it before the FIN.
    func tlsWillApply(_ change: Change, _ engine: TLSEngine) {
        guard !engine.isHandshaking, case .open(_, .open) = lifecycle else { return }
        switch change {
        case .shutdownRequested, .closeRequested: break
        case .peerEnded where !halfClosureSetting.load(ordering: .relaxed): break
        default: return
        }
        prepareToSend(engine)
        engine.session.closeNotify()
        queueTLSRecords(engine)
    }
}
