import Glibc

// The connection's work on its loop's thread: reading, flushing, closing, deadlines.

extension LoopConnection {
    /// The most read in one `readv`, and the most reads per wake-up: a fast peer leaves the
    /// loop's other items their turn.
    static let readChunk = 64 * 1024
    static let readsPerWakeUp = 4

    func handle(_ events: LoopDescriptorSource.Events) {
        switch phase {
        case .connecting:
            finishConnecting()
        case .open:
            if events.contains(.readable) { readInput() }
            if phase == .open && events.contains(.writable) { flush() }
            updateInterest()
        case .closed:
            break
        }
    }

    // MARK: Reading

    private func readInput() {
        // A nested run inside `onRead`: the buffer is lent out, and reading is off meanwhile.
        guard !delivering else {
            readableWhileDelivering = true
            return
        }
        let limit = settings.withLock { $0.inputLimit }
        var total = 0
        for _ in 0..<LoopConnection.readsPerWakeUp {
            let room = limit - input.count
            guard room > 0, !peerClosed else { break }
            let asked = min(room, LoopConnection.readChunk)
            let count = input.unique().read(from: fileDescriptor, maxLength: asked)
            if count > 0 {
                total += count
                if count < asked { break }  // the kernel had no more
            } else if count == 0 {
                peerClosed = true
            } else {
                let code = Int32(-count)
                if code == EAGAIN || code == EINTR { break }
                fail("read from \(remoteAddress)", code)
                return
            }
        }
        if total > 0 {
            lastActivity = .now
            deliverInput()
        }
        if peerClosed && phase == .open { peerDidClose() }
    }

    private func peerDidClose() {
        for (_, continuation) in pendingReads { continuation.resume(returning: []) }
        pendingReads.removeAll()
        emit(.readClosed)
        guard phase == .open else { return }
        if outputShut {
            closeNow(nil)
        } else if !settings.withLock({ $0.allowsHalfClosure }) {
            closeAfterFlush = true
            outputDidChange()
        }
    }

    /// Hands the input to waiting `read(maxLength:)` calls, then to `onRead`.
    func deliverInput() {
        guard !delivering else { return }
        // Closed: what was read before is still delivered, then the handler is let go.
        defer { if phase == .closed { readHandler = nil } }
        while !pendingReads.isEmpty && !input.isEmpty {
            let (maxLength, continuation) = pendingReads.removeFirst()
            continuation.resume(returning: input.read(maxLength: maxLength))
        }
        guard let handler = readHandler, !input.isEmpty, !settings.withLock({ $0.readingPaused }) else { return }
        delivering = true
        handler(self, &input)
        delivering = false
        readableWhileDelivering = false
    }

    /// Delivers waiting input on a later pass, in the connection's modes (after `onRead` is set or
    /// reading resumes).
    func scheduleDelivery() {
        loop.perform(inModes: postingModes) { [self] in
            deliverInput()
            updateInterest()
        }
    }

    // MARK: Writing

    /// Sends `bytes` at once if nothing is queued, and queues the rest.
    func enqueue(_ bytes: UnsafeRawBufferPointer) {
        guard acceptsOutput, bytes.count > 0 else { return }
        var rest = bytes
        if output.count == 0 && phase == .open {
            let sent = SocketCall.send(fileDescriptor, bytes)
            if sent < 0 && sent != -Int(EAGAIN) {
                fail("send to \(remoteAddress)", Int32(-sent))
                return
            }
            if sent > 0 {
                lastActivity = .now
                rest = UnsafeRawBufferPointer(rebasing: bytes[sent...])
            }
        }
        output.append(rest)
        outputDidChange()
    }

    /// Moves the bytes of `buffer` to the output, sending first what the socket takes if nothing
    /// is queued.
    func enqueue(_ buffer: EventBuffer) {
        guard acceptsOutput, buffer.count > 0 else { return }
        if output.count == 0 && phase == .open {
            let sent = buffer.send(to: fileDescriptor)
            if sent < 0 && sent != -Int(EAGAIN) {
                fail("send to \(remoteAddress)", Int32(-sent))
                return
            }
            if sent > 0 { lastActivity = .now }
        }
        output.moveAll(from: buffer)
        outputDidChange()
    }

    /// Whether writes are taken: not once closing, closed or shut down (they are dropped then).
    private var acceptsOutput: Bool {
        phase != .closed && !closeAfterFlush && !shutdownAfterFlush
    }

    /// Sends queued output until the socket takes no more.
    func flush() {
        while output.count > 0 {
            let sent = output.send(to: fileDescriptor)
            if sent > 0 {
                lastActivity = .now
                continue
            }
            if sent == -Int(EAGAIN) || sent == -Int(EINTR) { break }
            fail("send to \(remoteAddress)", Int32(-sent))
            return
        }
        outputDidChange()
    }

    /// After the queue changed: watermarks, and what an empty queue allows (FIN, close).
    func outputDidChange() {
        guard phase != .closed else { return }
        let queued = output.count
        bufferedOutput.store(queued, ordering: .releasing)
        let (low, high) = settings.withLock { $0.watermarks }
        if !aboveHighWatermark && queued >= high && high > 0 {
            aboveHighWatermark = true
            belowHighWatermark.store(false, ordering: .releasing)
        } else if aboveHighWatermark && queued <= low {
            aboveHighWatermark = false
            belowHighWatermark.store(true, ordering: .releasing)
            let writers = pendingWrites
            pendingWrites.removeAll()
            for writer in writers { writer.resume() }
            emit(.writable)
            guard phase != .closed else { return }
        }
        if queued == 0 && phase == .open {
            if closeAfterFlush {
                closeNow(nil)
                return
            }
            if shutdownAfterFlush && !outputShut {
                outputShut = true
                shutdown(fileDescriptor, Int32(SHUT_WR))
                if peerClosed {
                    closeNow(nil)
                    return
                }
            }
        }
        updateInterest()
    }

    /// Watches what the connection can use now: readability while it may read, writability only
    /// while output is queued (or while connecting).
    func updateInterest() {
        guard phase != .closed else { return }
        var wanted: LoopDescriptorSource.Events = []
        if phase == .connecting {
            wanted = .writable
        } else {
            if delivering {
                // While `onRead` runs the input is lent out: not even its count is read here. The
                // interest stays as it is (a write from the handler costs no epoll change; the
                // delivery's caller updates it after), unless a nested run found the socket readable.
                if watched.contains(.readable) && !readableWhileDelivering { wanted.insert(.readable) }
            } else {
                let (paused, limit) = settings.withLock { ($0.readingPaused, $0.inputLimit) }
                if !peerClosed && !paused && !closeAfterFlush && input.count < limit { wanted.insert(.readable) }
            }
            if output.count > 0 { wanted.insert(.writable) }
        }
        guard wanted != watched else { return }
        watched = wanted
        descriptorSource.events = wanted
    }

    // MARK: Closing

    func fail(_ call: String, _ code: Int32) {
        closeNow(SocketCall.failure(call, code))
    }

    /// Closes at once (the descriptor once libevent has let go), reports `closed` once, and lets
    /// waiting calls and handlers go.
    func closeNow(_ error: LoopError?) {
        guard phase != .closed else { return }
        let wasConnecting = phase == .connecting
        phase = .closed
        closedError = error
        descriptorSource.invalidate()
        output = EventBuffer()
        bufferedOutput.store(0, ordering: .releasing)
        let ended = error ?? LoopError("the connection to \(remoteAddress) is closed")
        for (_, continuation) in pendingReads {
            if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: []) }
        }
        pendingReads.removeAll()
        for writer in pendingWrites { writer.resume(throwing: ended) }
        pendingWrites.removeAll()
        let completion = connectCompletion
        connectCompletion = nil
        let handler = eventHandler
        eventHandler = nil
        readHandler = nil
        closedReported = handler != nil || wasConnecting
        leaveLoop()
        if wasConnecting {
            completion?(.failure(ended))
        } else {
            handler?(self, .closed(error))
        }
    }

    /// The source went away without `closeNow` (the loop's thread exited, or epoll refused it).
    func sourceWasInvalidated() {
        guard phase != .closed else { return }
        closeNow(descriptorSource.error ?? LoopError("the loop of the connection to \(remoteAddress) has ended"))
    }

    func emit(_ event: Event) {
        eventHandler?(self, event)
    }

    // MARK: Deadlines

    /// The one timer of a connection: its connect deadline while connecting, then its idle
    /// deadline. Re-armed lazily: traffic only updates `lastActivity`.
    func armDeadline(at fireDate: ContinuousClock.Instant? = nil) {
        guard phase != .closed else { return }
        let deadline: ContinuousClock.Instant
        if let fireDate {
            deadline = fireDate
        } else {
            guard let idle = settings.withLock({ $0.idleTimeout }) else {
                // No idle limit any more: the timer goes, so that it does not wake the loop.
                if phase == .open { dropTimer() }
                return
            }
            deadline = lastActivity + idle
        }
        if let timer = residency.withLock({ $0.timer }) {
            timer.fireDate = deadline
            return
        }
        let timer = LoopTimer(fireAt: deadline, interval: .seconds(3_600)) { [weak self] _ in self?.deadlinePassed() }
        loop.attach(timer, to: self)
    }

    /// Invalidates the connection's timer, if it has one.
    func dropTimer() {
        let timer = residency.withLock { residency in
            defer { residency.timer = nil }
            return residency.timer
        }
        timer?.invalidate()
    }

    private func deadlinePassed() {
        switch phase {
        case .connecting:
            closeNow(LoopError("connecting to \(remoteAddress) timed out", systemError: ETIMEDOUT))
        case .open:
            guard let idle = settings.withLock({ $0.idleTimeout }) else { return }
            if ContinuousClock.now - lastActivity >= idle {
                closeNow(LoopError("the connection to \(remoteAddress) was idle for \(idle)", systemError: ETIMEDOUT))
            } else {
                armDeadline()
            }
        case .closed:
            break
        }
    }
}
