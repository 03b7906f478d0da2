import Glibc

// A TLS connection is a LoopConnection whose transport is a `TLSTransport` over its socket
// (`StreamTransport.tls`): a wake-up's receive takes the handshake on and decrypts into the input
// buffer (`receive(through:limit:)`), writes encrypt into records that go to the socket or
// the output queue (`write(through:...)`), and the changes that end this side's stream make
// close_notify first (`closeNotify(through:)`). Each returns the outcome the connection's I/O code
// acts on, as it does on the plain socket's; everything else (events, watermarks, backpressure,
// timeouts, modes, async calls) is the plaintext connection's own.

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
    /// The TLS filter's slot, in the extras (`LoopConnection+Thread.swift`).
    var filterSlot: FilterSlot { FilterSlot(connection: Unmanaged.passUnretained(self)) }

    /// `filterSlot`: the `AtomicLazyReference` calls the TLS code makes, on the extras' slot.
    struct FilterSlot {
        // Unretained and unmanaged: the slot is used within a call on the connection, which holds
        // it, and reading an `unowned(unsafe)` reference retained it on every read and write
        // (docs/performance-notes.md#instructions-per-request).
        let connection: Unmanaged<LoopConnection>

        func load() -> TLSTransport? { connection._withUnsafeGuaranteedRef { $0.extrasSlot.load()?.filter.load() } }

        @discardableResult
        func storeIfNil(_ filter: TLSTransport) -> TLSTransport {
            connection._withUnsafeGuaranteedRef { $0.makeExtras().filter.storeIfNil(filter) }
        }
    }

    // MARK: Facts

    /// Whether the connection speaks TLS (it was accepted by a TLS listener, or connected with a
    /// TLS configuration).
    ///
    /// Any thread.
    public var isTLS: Bool { filterSlot.load() != nil }

    /// The application protocol ALPN settled on (`"http/1.1"`, `"h2"`), or nil: no TLS, or no
    /// protocol both sides named.
    ///
    /// Any thread.
    public var negotiatedProtocol: String? { filterSlot.load()?.negotiatedProtocol }

    /// On a client, the subject of the server's certificate, RFC 2253 style
    /// (`CN=example.com,O=Example`); nil without TLS, and on the server side (clients are not
    /// asked for certificates).
    ///
    /// Any thread.
    public var peerCertificateSubject: String? { filterSlot.load()?.peerCertificateSubject }

    /// The TLS version spoken (`"TLSv1.3"`, `"TLSv1.2"`), or nil without TLS.
    ///
    /// Any thread.
    public var tlsVersion: String? { filterSlot.load()?.version }

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
        let filter: TLSTransport
        do {
            filter = try TLSTransport(
                context, serverName: serverName,
                verifyName: context.isServer ? nil : serverName ?? remoteAddress.host,
                socket: SocketTransport(descriptor: fileDescriptor), peer: remoteAddress)
        } catch {
            apply(.failed(error))
            completion(.failure(error))
            return
        }
        _ = filterSlot.storeIfNil(filter)
        filter.completion = completion
        // Until the handshake is done, a close for any reason (reset, end of stream, timeout,
        // cancellation, a failed handshake) is the handshake's failure. The accept handler or the
        // connect completion sets the application's handler afterwards.
        core.eventHandler = { connection, event in
            guard case .closed(let error) = event, let completion = filter.endHandshake() else { return }
            completion(
                .failure(
                    error ?? LoopError("the connection to \(connection.remoteAddress) closed during the TLS handshake"))
            )
        }
        filter.timer = loop.schedule(after: handshakeTimeout, inModes: postingModes) { [self] in
            guard filter.isHandshaking else { return }
            apply(
                .failed(
                    LoopError(
                        "the TLS handshake with \(remoteAddress) did not finish within \(handshakeTimeout)",
                        systemError: ETIMEDOUT)))
        }
        guard !context.isServer else { return }
        if case .refused(let error) = stepHandshake(filter, allowance: 0).outcome { apply(.failed(error)) }
    }

    /// One step of the handshake with what the socket gives within `allowance`. Nil once it has
    /// succeeded and the completion has run with the connection still open (reading goes on),
    /// else the wake-up's outcome. A failure sends OpenSSL's alert if the socket takes it at once;
    /// the close it leads to is the handshake's failure (see `startTLS`).
    private func stepHandshake(
        _ filter: TLSTransport, allowance: Int
    ) -> (outcome: ReceiveOutcome?, wire: OpenSSLSession.Wire) {
        let (step, wire) = filter.handshake(allowance: allowance, sendingNow: mayWriteRecordsNow)
        if wire.received > 0 { core.lastActivity = LoopConnection.coarseNow }
        if case .refused(let error) = step {
            _ = filter.socket.send(filter.unsent)
            return (.refused(error), wire)
        }
        guard recordsWritten(filter, wire) else { return (.drained(0), wire) }
        switch step {
        case .done:
            let completion = filter.finishHandshake()
            core.eventHandler = nil
            completion?(.success(self))
            return (isClosed ? .drained(0) : nil, wire)
        case .wantsInput, .refused: return (.drained(0), wire)
        case .failed(let failure): return (.failed(failure), wire)
        }
    }

    // MARK: The transport's calls (loop thread)

    /// One wake-up's receive: the session may receive the plaintext read's budget (while the
    /// input is below `limit`), takes the handshake on, then decrypts into the input buffer. The
    /// peer's close_notify, or its end of stream, ends the input as a plaintext end of stream
    /// does; during the handshake either fails it.
    func receive(through filter: TLSTransport, limit: Int) -> ReceiveOutcome {
        var allowance = input.count < limit ? LoopConnection.readsPerWakeUp * LoopConnection.readChunk : 0
        var earlier: SocketOutcome? = nil
        if filter.isHandshaking {
            let (outcome, wire) = stepHandshake(filter, allowance: allowance)
            if let outcome { return outcome }
            // The rest of the budget, unless the socket said it had no more (which stands).
            earlier = wire.receiveStop
            allowance = earlier == nil ? allowance - wire.received : 0
        }
        let (outcome, wire) = input.withUnique {
            filter.receive(into: $0, allowance: allowance, sendingNow: mayWriteRecordsNow, earlier: earlier)
        }
        if wire.received > 0 { core.lastActivity = LoopConnection.coarseNow }
        // Reading may have made records too (TLS 1.3 key updates, alerts).
        guard recordsWritten(filter, wire) else { return .drained(0) }
        return outcome
    }

    /// Encrypts `bytes`; the records go to the socket at once if `sendingNow`, else to `rest`.
    func write(through filter: TLSTransport, _ bytes: UnsafeRawBufferPointer, sendingNow: Bool) -> WriteOutcome {
        guard !filter.isHandshaking else { return .dropped }
        let (refusal, wire) = filter.write(bytes, sendingNow: sendingNow)
        return written(filter, refusal, wire)
    }

    /// Encrypts the bytes of `buffer`, block by block, leaving it empty.
    func write(through filter: TLSTransport, _ buffer: EventBuffer, sendingNow: Bool) -> WriteOutcome {
        guard !filter.isHandshaking else { return .dropped }
        let (refusal, wire) = filter.write(buffer, sendingNow: sendingNow)
        return written(filter, refusal, wire)
    }

    private func written(_ filter: TLSTransport, _ refusal: LoopError?, _ wire: OpenSSLSession.Wire) -> WriteOutcome {
        if let refusal { return .refused(refusal) }
        if let failure = wire.sendFailure { return .failed(failure) }
        return .encoded(sent: wire.sent, rest: filter.unsent)
    }

    /// This side's stream is about to end: close_notify goes first, so that the peer reads it
    /// before the FIN.
    func closeNotify(through filter: TLSTransport) {
        guard !filter.isHandshaking else { return }
        _ = recordsWritten(filter, filter.closeNotify(sendingNow: mayWriteRecordsNow))
    }

    /// Whether records made while reading (or closing) may go to the socket at once: nothing is
    /// queued for it.
    private var mayWriteRecordsNow: Bool { queuedBytes == 0 && !isClosed }

    /// After a session call that was not a write: a failed send fails the connection; what the
    /// socket took counts as activity and as a change of the output; what it did not take goes to
    /// the output queue. False once the connection is closed.
    private func recordsWritten(_ filter: TLSTransport, _ wire: OpenSSLSession.Wire) -> Bool {
        if let failure = wire.sendFailure {
            fail("send to \(remoteAddress)", failure)
            return false
        }
        if wire.sent > 0 { core.lastActivity = LoopConnection.coarseNow }
        if filter.unsent.count > 0 {
            queueEncoded(filter.unsent)
        } else if wire.sent > 0 {
            outputDidChange()
        }
        return !isClosed
    }
}
