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
    /// Any thread. Throws a `LoopError` (`systemError` `ECONNREFUSED`, `ETIMEDOUT`, ...).
    public static func connect(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode] = [.common],
        timeout: Duration = .seconds(30)
    ) async throws -> LoopConnection {
        // Handed over through a lock, not only through the continuation: the connection was built
        // on the loop's thread, and the lock orders that for every reader (ThreadSanitizer too).
        let outcome = Locked<Result<LoopConnection, LoopError>?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            connect(to: address, on: loop, inModes: modes, timeout: timeout) { result in
                outcome.withLock { $0 = result }
                continuation.resume()
            }
        }
        return try outcome.withLock { $0! }.get()
    }

    private static func startConnecting(
        to address: SocketAddress, on loop: Loop, inModes modes: [Loop.Mode], deadline: ContinuousClock.Instant,
        _ completion: sending @escaping (Result<LoopConnection, LoopError>) -> Void
    ) {
        let descriptor: Int32
        do {
            descriptor = try SocketCall.makeSocket(for: address)
        } catch {
            completion(.failure(error))
            return
        }
        let code = address.withSockaddr { Glibc.connect(descriptor, $0, $1) }
        // A Unix socket whose listener's backlog is full says EAGAIN instead of waiting.
        if code != 0 && errno != EINPROGRESS {
            let failure = SocketCall.failure("connect(\(address))", errno)
            Glibc.close(descriptor)
            completion(.failure(failure))
            return
        }
        SocketCall.disableNagle(descriptor, address)
        let local = SocketCall.address(of: descriptor) ?? address
        let connection = LoopConnection(
            descriptor: descriptor, local: local, remote: address, loop: loop, modes: modes, phase: .connecting)
        connection.connectCompletion = completion
        for mode in modes { loop.add(connection, forMode: mode) }
        // Connected at once or not, the outcome is read when the socket turns writable.
        connection.armDeadline(at: deadline)
    }

    /// The socket turned writable (or failed) while connecting: its pending error says which.
    func finishConnecting() {
        let code = SocketCall.pendingError(fileDescriptor)
        guard code == 0 else {
            fail("connect(\(remoteAddress))", code)
            return
        }
        phase = .open
        lastActivity = LoopConnection.coarseNow
        dropTimer()
        armDeadline()
        let completion = connectCompletion
        connectCompletion = nil
        completion?(.success(self))
        guard phase == .open else { return }
        if queuedBytes > 0 { flush() }
        updateInterest()
    }

    // MARK: Async

    /// Waits for input and returns up to `maxLength` bytes of it; `[]` at the end of the stream.
    ///
    /// Any thread. After the connection closed, returns what is left of its input, then `[]`,
    /// or throws its `LoopError` if it closed on an error. Waiting calls are served before `onRead`. A `maxLength` below 1
    /// is a programmer error.
    public func read(maxLength: Int) async throws -> [UInt8] {
        precondition(maxLength >= 1, "RunLoopKit: read(maxLength:) needs at least 1, not \(maxLength)")
        return try await withCheckedThrowingContinuation { continuation in
            onLoop { connection in
                if !connection.input.isEmpty && !connection.delivering {
                    continuation.resume(returning: connection.input.read(maxLength: maxLength))
                } else if connection.phase == .closed, let error = connection.closedError {
                    continuation.resume(throwing: error)
                } else if connection.phase == .closed || connection.peerClosed || connection.closeAfterFlush {
                    continuation.resume(returning: [])
                } else {
                    connection.pendingReads.append((maxLength, continuation))
                    connection.updateInterest()
                }
            }
        }
    }

    /// Queues `bytes`, then waits until the queued output is below the high watermark.
    ///
    /// Any thread. Throws a `LoopError` if the connection is closing or closed (the bytes are
    /// dropped then) or closes while the call waits.
    public func write(_ bytes: [UInt8]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            onLoop { connection in
                guard connection.phase != .closed && !connection.closeAfterFlush && !connection.shutdownAfterFlush
                else {
                    continuation.resume(throwing: LoopError("the connection to \(connection.remoteAddress) is closed"))
                    return
                }
                bytes.withUnsafeBytes { connection.enqueue($0) }
                if connection.phase == .closed {
                    continuation.resume(throwing: LoopError("the connection to \(connection.remoteAddress) is closed"))
                } else if connection.aboveHighWatermark {
                    connection.pendingWrites.append(continuation)
                } else {
                    continuation.resume()
                }
            }
        }
    }
}
