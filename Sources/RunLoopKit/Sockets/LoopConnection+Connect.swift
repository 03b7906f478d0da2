import Glibc

// Connecting, and the async forms of reading and writing.

extension LoopConnection {
    /// Connects to `address`; `completion` runs on `loop`'s thread, in `modes`, with the connected
    /// connection (already in `modes`) or a `LoopError`: `systemError` is `ECONNREFUSED` for a
    /// refusal, `ETIMEDOUT` when `timeout` passed first.
    ///
    /// Any thread. A timeout that is not positive is a programmer error; so is an empty `modes`.
    public static func connect(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode] = [.common],
        timeout: Duration = .seconds(30), _ completion: sending @escaping (Result<LoopConnection, LoopError>) -> Void
    ) {
        precondition(timeout > .zero, "RunLoopKit: connect(timeout:) needs a positive timeout, not \(timeout)")
        precondition(!modes.isEmpty, "RunLoopKit: connect(inModes:) needs at least one mode")
        let box = Unchecked(completion)
        let start = { @Sendable in
            startConnecting(to: address, on: loop, inModes: modes, deadline: .now + timeout, box.value)
        }
        if loop.isCurrentThread { start() } else { loop.perform(inModes: modes, start) }
    }

    /// Connects to `address` and returns the connection, served by `loop` in `modes`.
    ///
    /// Any thread or task. Throws a `LoopError` (`systemError` `ECONNREFUSED`, `ETIMEDOUT`, ...).
    /// Cancelling the calling task ends the attempt within one pass of the loop in `modes`: its
    /// socket is closed and this throws `CancellationError` (a task already cancelled throws it at
    /// once, and no socket is made). An attempt that connected before the cancellation reached the
    /// loop returns its connection.
    public static func connect(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode] = [.common],
        timeout: Duration = .seconds(30)
    ) async throws -> LoopConnection {
        try await connect(to: address, on: loop, inModes: modes, timeout: timeout, startingTLS: nil)
    }

    /// The awaited `connect`, followed by a TLS handshake when `start` is given
    /// (`LoopConnection+TLS.swift`).
    static func connect(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode], timeout: Duration,
        startingTLS start: TLSStart?
    ) async throws -> LoopConnection {
        precondition(timeout > .zero, "RunLoopKit: connect(timeout:) needs a positive timeout, not \(timeout)")
        precondition(!modes.isEmpty, "RunLoopKit: connect(inModes:) needs at least one mode")
        try Task.checkCancellation()
        let attempt = ConnectAttempt()
        // Handed over through a lock, not only through the continuation: the connection was built
        // on the loop's thread, and the lock orders that for every reader (ThreadSanitizer too).
        let outcome = Locked<Result<LoopConnection, any Error>?>(nil)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let complete = { @Sendable (result: Result<LoopConnection, any Error>) in
                    outcome.withLock { $0 = result }
                    continuation.resume()
                }
                let start = { @Sendable in
                    let finish = { (result: Result<LoopConnection, LoopError>) in
                        attempt.connection = nil  // on the loop's thread, as the completion runs
                        // A failure after the task was cancelled is the cancellation's doing (or
                        // no longer of interest): the caller learns it was cancelled.
                        complete(
                            attempt.flag.isCancelled
                                ? result.mapError { _ in CancellationError() } : result.mapError { $0 })
                    }
                    startConnecting(
                        to: address, on: loop, inModes: modes, deadline: .now + timeout, attempt: attempt,
                        handshaking(start, attempt, finish))
                }
                if loop.isCurrentThread {
                    start()
                } else if !loop.perform(inModes: modes, start) {
                    complete(.failure(LoopError.loopEnded))
                }
            }
        } onCancel: {
            attempt.flag.cancel()
            let cancel = { @Sendable in attempt.cancelOnLoop() }
            if loop.isCurrentThread { cancel() } else { loop.perform(inModes: modes, cancel) }
        }
        return try outcome.withLock { $0! }.get()
    }

    private static func startConnecting(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode], deadline: ContinuousClock.Instant,
        attempt: ConnectAttempt? = nil, _ completion: sending @escaping (Result<LoopConnection, LoopError>) -> Void
    ) {
        // A failure found here is reported later, on a pass of the loop in `modes`, as any
        // outcome is: never inside the `connect` call that started it (its caller may not expect
        // the completion yet, or only in a modal mode).
        let box = Unchecked(completion)
        let failLater = { @Sendable (failure: LoopError) in
            // A loop that has ended runs nothing more: the caller learns at once.
            if !loop.perform(inModes: modes, { box.value(.failure(failure)) }) { box.value(.failure(failure)) }
        }
        if let attempt, attempt.flag.isCancelled {
            failLater(LoopError("connecting to \(address) was cancelled"))
            return
        }
        let descriptor: Int32
        do {
            descriptor = try Platform.streamSocket(for: address).get(failing: "socket")
        } catch {
            failLater(error)
            return
        }
        if case .failure(let failure) = Platform.startConnecting(descriptor, to: address) {
            Platform.closeDescriptor(descriptor)
            failLater(.systemCall("connect(\(address))", failedWith: failure))
            return
        }
        Platform.disableNagle(descriptor, for: address)
        let local = Platform.address(of: descriptor) ?? address
        let connection = LoopConnection(
            descriptor: descriptor, local: local, remote: address, loop: loop, modes: modes, connecting: true)
        connection.core.connectCompletion = box.value
        attempt?.connection = connection
        for mode in modes { loop.add(connection, forMode: mode) }
        // Connected at once or not, the outcome is read when the socket turns writable.
        connection.armDeadline(at: deadline)
    }

    /// The socket turned writable (or failed) while connecting: its pending error says which.
    func finishConnecting() {
        assertOnLoopThread()
        if let failure = Platform.pendingError(fileDescriptor) {
            fail("connect(\(remoteAddress))", failure)
            return
        }
        apply(.connected)
        openState.store(true, ordering: .releasing)
        core.lastActivity = LoopConnection.coarseNow
        dropTimer()
        armDeadline()
        let completion = core.connectCompletion
        core.connectCompletion = nil
        completion?(.success(self))
        guard !isClosed else { return }
        // What was written while connecting goes now; a `close()` or `shutdownOutput()` made
        // meanwhile is carried out once the queue is empty.
        if queuedBytes > 0 { flush() } else { outputDidChange() }
    }

    // MARK: Async

    /// Waits for input and returns up to `maxLength` bytes of it; `[]` at the peer's end of stream.
    ///
    /// Any thread or task. Waiting calls are served before `onRead`, in the order they were made.
    /// Input that arrived before the connection closed is still returned; after that, a connection
    /// that closed on an error throws that error, and one closed locally (`close()`, `abort()`)
    /// throws a `LoopError` ("the connection ... is closed"). Cancelling the calling task ends the
    /// wait within one pass of the loop in the connection's modes: this throws `CancellationError`
    /// and takes no bytes (they go to the next read or to `onRead`); the connection stays usable. A
    /// task already cancelled throws at once. A `maxLength` below 1 is a programmer error.
    public func read(maxLength: Int) async throws -> [UInt8] {
        precondition(maxLength >= 1, "RunLoopKit: read(maxLength:) needs at least 1, not \(maxLength)")
        try Task.checkCancellation()
        let flag = CancellationFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                onLoop { $0.startReading(maxLength, flag, continuation) }
            }
        } onCancel: {
            flag.cancel()
            onLoop { $0.cancelReading(flag) }
        }
    }

    /// Queues `bytes`, then waits until the queued output is below the high watermark.
    ///
    /// Any thread or task; writes from one task go out in the order they were made. Throws a
    /// `LoopError` if the connection is closing or closed (the bytes are dropped then) or closes
    /// while the call waits. Cancelling the calling task ends the wait within one pass of the loop
    /// in the connection's modes and this throws `CancellationError`: bytes already queued stay
    /// queued and are still sent, in order (they are part of the stream, and dropping some would
    /// corrupt it; `abort()` drops them). A task cancelled before the loop took the bytes (already
    /// cancelled when it called, for one) queues nothing.
    ///
    /// The one `write(_:)` of bytes: an awaited call waits in every context, top-level code
    /// included. `enqueue(_:)` queues without waiting.
    public func write(_ bytes: [UInt8]) async throws {
        try await awaitWrite { connection in
            // The array crosses to the loop as it is; what the socket does not take at once is
            // copied there, or (a large rest) queued by reference to the array.
            connection.queueOutput(bytes)
        }
    }

    /// `write(_:)` of any collection of bytes (`ArraySlice<UInt8>`, `String.UTF8View`, …): queues
    /// a copy of them and waits below the high watermark, as the `[UInt8]` form does.
    ///
    /// Any thread or task; the rules of the `[UInt8]` form (order, errors, cancellation).
    public func write(_ bytes: some Collection<UInt8>) async throws {
        try await write(Array(bytes))
    }

    /// The awaiting write: `enqueue` queues the bytes on the loop's thread, then the call waits
    /// below the high watermark.
    private func awaitWrite(_ enqueue: @escaping @Sendable (LoopConnection) -> Void) async throws {
        try Task.checkCancellation()
        let flag = CancellationFlag()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                onLoop { $0.startWriting(flag, continuation, enqueue) }
            }
        } onCancel: {
            flag.cancel()
            onLoop { $0.cancelWriting(flag) }
        }
    }

    // MARK: Async, on the loop's thread

    /// What a connection closed by `close()` or `abort()` gives reads and writes.
    var closedLocallyError: LoopError { LoopError("the connection to \(remoteAddress) is closed") }

    /// Resumes every waiting read with `error`.
    func failPendingReads(_ error: LoopError) {
        let reads = core.pendingReads
        core.pendingReads.removeAll()
        for read in reads { read.continuation.resume(throwing: error) }
    }

    private func startReading(
        _ maxLength: Int, _ flag: CancellationFlag, _ continuation: CheckedContinuation<[UInt8], any Error>
    ) {
        assertOnLoopThread()
        if flag.isCancelled {
            continuation.resume(throwing: CancellationError())
        } else if !input.isEmpty && !core.delivery.isDelivering {
            continuation.resume(returning: input.read(maxLength: maxLength))
        } else if isClosed, let closedError = core.closedError {
            continuation.resume(throwing: closedError)
        } else if closedLocally {
            continuation.resume(throwing: closedLocallyError)
        } else if isClosed || inputEnded || isClosing {
            continuation.resume(returning: [])
        } else {
            core.pendingReads.append((maxLength, flag, continuation))
            updateInterest()
        }
    }

    /// The task of the read with `flag` was cancelled: if it still waits, it ends, with no bytes.
    private func cancelReading(_ flag: CancellationFlag) {
        guard let index = core.pendingReads.firstIndex(where: { $0.flag === flag }) else { return }
        let read = core.pendingReads.remove(at: index)
        read.continuation.resume(throwing: CancellationError())
        updateInterest()
    }

    private func startWriting(
        _ flag: CancellationFlag, _ continuation: CheckedContinuation<Void, any Error>,
        _ enqueue: (LoopConnection) -> Void
    ) {
        assertOnLoopThread()
        guard !flag.isCancelled else {
            continuation.resume(throwing: CancellationError())
            return
        }
        guard acceptsOutput else {
            continuation.resume(throwing: core.closedError ?? closedLocallyError)
            return
        }
        enqueue(self)
        if isClosed {
            continuation.resume(throwing: core.closedError ?? closedLocallyError)
        } else if !belowHighWatermark.load(ordering: .relaxed) {
            output.waitBelowHighWatermark(flag, continuation)
        } else {
            continuation.resume()
        }
    }

    /// The task of the write with `flag` was cancelled: if it still waits, it ends; its bytes stay
    /// queued.
    private func cancelWriting(_ flag: CancellationFlag) {
        output.cancelWaiting(flag)
    }
}

/// One awaited `connect`: the flag its task's cancellation sets, and the connection once the loop
/// made it.
final class ConnectAttempt: @unchecked Sendable {
    // @unchecked: `connection` is touched on the loop's thread only.
    let flag = CancellationFlag()
    var connection: LoopConnection?

    /// On the loop's thread, after the task was cancelled: an attempt still connecting closes its
    /// socket and fails (which the awaiting call reports as `CancellationError`).
    func cancelOnLoop() {
        guard let connection else { return }
        self.connection = nil
        guard connection.isConnecting || connection.transport.isEstablishing else { return }
        connection.apply(.failed(LoopError("connecting to \(connection.remoteAddress) was cancelled")))
    }
}
