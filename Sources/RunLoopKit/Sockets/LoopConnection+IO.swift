import Glibc

// The connection's work on its loop's thread: reading, flushing, closing, deadlines.

extension LoopConnection {
    /// The most read in one `readv`, and the most bytes read per wake-up (`readsPerWakeUp` such
    /// reads): a fast peer leaves the loop's other items their turn.
    static let readChunk = 64 * 1024
    static let readsPerWakeUp = 4
    /// While a connection's wake-ups read less than this, the first read of the next one goes to
    /// this much scratch space (`Loop.readScratch`) and is then copied to the input buffer (only
    /// if it filled it do the next reads go to the input buffer's own blocks). A request or a
    /// message fits, and a buffer block of its size comes from malloc's per-thread cache, where
    /// reading into the buffer itself reserved a 64 KiB block for every read (and freed it again
    /// when the handler consumed the bytes). A connection that reads more (a bulk transfer) reads
    /// straight into its buffer: the scratch read first cost it a third of its throughput
    /// (`runloop-bench --filter bulk`, 1.4–1.9 against 0.8–0.9 GB/s).
    static let firstReadSize = 4 * 1024
    /// How long a connection that `close()` ended waits for the peer's end of stream, and how
    /// many bytes it drops meanwhile, before it closes anyway.
    static let lingerTime: Duration = .seconds(2)
    static let lingerLimit = 1 << 20

    func handle(_ events: LoopDescriptorSource.Events) {
        assertOnLoopThread()
        switch core.lifecycle {
        case .connecting:
            finishConnecting()
        case .closed:
            break
        case .open, .closing, .lingering:
            if events.contains(.hangUp) { peerMayHaveGone() }
            if !isClosed && events.contains(.readable) {
                if isClosing { discardInput() } else { readInput() }
            }
            if !isClosed && events.contains(.writable) { flush() }
            updateInterest()
        }
    }

    // MARK: Reading

    /// One wake-up's reading through the transport: what it gave is delivered, and an end of
    /// stream or a failure ends the connection as its outcome says.
    private func readInput() {
        // A nested run inside `onRead`: the buffer is lent out, and reading is off meanwhile.
        guard core.delivery.readable() else { return }
        let scratch = readScratch
        let received: Int
        let ended: Bool
        switch transport.receive(limit: currentInputLimit, scratch: core.readsAreSmall ? scratch : nil, for: self) {
        case .drained(let count), .stopped(let count):
            (received, ended) = (count, false)
        case .ended(let count):
            (received, ended) = (count, true)
        case .failed(let failure):
            fail("read from \(remoteAddress)", failure)
            return
        case .refused(let error):
            apply(.failed(error))
            return
        }
        // A transport's handshake may have handed the connection out, and it may be closed now.
        guard !isClosed else { return }
        if received > 0 {
            core.readsAreSmall = received < scratch.count
            core.lastActivity = LoopConnection.coarseNow
            deliverInput()
        }
        guard ended && !isClosed else { return }
        if isPaused && core.readHandler != nil && !input.isEmpty {
            // The handler left input for when reading resumes (it stopped at the high watermark, or
            // paused): the end of stream is reported now, and applied once that input is delivered
            // and reading goes on (the socket gives its end of stream again).
            reportEndOfStream()
        } else {
            peerDidClose()
        }
    }

    /// The loop's scratch space for reads, without a reference to the loop taken.
    private var readScratch: UnsafeMutableRawBufferPointer {
        boundLoop.load(ordering: .relaxed)!._withUnsafeGuaranteedRef { $0.readScratch }
    }

    /// Calls `readOnce(index)` (index 0, 1, ...: one read of the socket below the transport,
    /// giving its outcome and the count asked for) until it returns nil (its own limit), the
    /// socket has no more (a read short of what it asked, or EAGAIN), the stream ends or a read
    /// fails. Returns the errno of a failed read (or nil), and whether the end of stream was read.
    private func readUntilDrained(
        _ readOnce: (Int) -> (read: SocketOutcome, asked: Int)?
    ) -> (failure: Errno?, ended: Bool) {
        var index = 0
        while let (read, asked) = readOnce(index) {
            index += 1
            switch read {
            case .done(let count):
                if count < asked { return (nil, false) }
            case .wouldBlock: return (nil, false)
            case .endOfStream: return (nil, true)
            case .failed(let failure): return (failure, false)
            }
        }
        return (nil, false)
    }

    /// Not reading (paused, or stalled at the input limit), the connection was told the socket
    /// changed: a reset closes it with its error; the peer's end of stream is reported at once.
    /// Paused, or stalled while awaited reads lag behind, the input the peer sent before its end
    /// stays readable (reading on takes it, and then the connection goes on as at any end of
    /// stream). Stalled with an `onRead` handler that left the full buffer unconsumed, nothing
    /// more can reach that handler: unless `readClosed`'s handler made room (a higher
    /// `inputLimit`), the input the connection has not read is dropped, read to its end so that
    /// the peer gets an orderly end rather than a reset (closing a socket with unread input sends
    /// one), and the connection ends as at any end of stream: then (unless `allowsHalfClosure`)
    /// it flushes its output and closes.
    private func peerMayHaveGone() {
        if let failure = Platform.pendingError(fileDescriptor) {
            fail("read from \(remoteAddress)", failure)
            return
        }
        guard !inputEnded, !isClosing, Platform.peerHasEnded(fileDescriptor) else { return }
        reportEndOfStream()
        guard !isPaused, core.readHandler != nil, !inputEnded, !isClosing, !isClosed,
            input.count >= currentInputLimit
        else { return }
        dropUnreadInput()
        if !isClosed { peerDidClose() }
    }

    /// Reads and drops what the socket holds, up to the peer's end of stream, which has arrived
    /// (so what it holds is all there will be).
    private func dropUnreadInput() {
        let scratch = readScratch
        let socket = transport.socket
        let (failure, _) = readUntilDrained { _ in (socket.receive(into: scratch), scratch.count) }
        if let failure { fail("read from \(remoteAddress)", failure) }
    }

    func peerDidClose() {
        for read in core.pendingReads { read.continuation.resume(returning: []) }
        core.pendingReads.removeAll()
        reportEndOfStream()
        apply(.peerEnded)
    }

    /// Reports `readClosed`, once (kept for the next `onEvent` handler when none is set).
    private func reportEndOfStream() {
        guard core.endOfStream.report(handler: core.eventHandler != nil), let handler = core.eventHandler else {
            return
        }
        handler(self, .readClosed)
    }

    /// Hands the input to waiting `read(maxLength:)` calls, then to `onRead`.
    func deliverInput() {
        assertOnLoopThread()
        guard !core.delivery.isDelivering else { return }
        // Closed: what was read before is still delivered, then the handler is let go.
        defer { if isClosed { core.readHandler = nil } }
        while !core.pendingReads.isEmpty && !input.isEmpty {
            let read = core.pendingReads.removeFirst()
            read.continuation.resume(returning: input.read(maxLength: read.maxLength))
        }
        guard let handler = core.readHandler, !input.isEmpty, !isPaused else { return }
        guard core.delivery.begin() else { return }
        handler(self, &input)
        // A readable event meanwhile needs nothing more: the callers update the interest next,
        // which watches the socket again.
        _ = core.delivery.end()
    }

    /// Delivers waiting input on a later pass, in the connection's modes (after `onRead` is set or
    /// reading resumes).
    func scheduleDelivery() {
        hop(to: loop) { [self] in
            deliverInput()
            updateInterest()
        }
    }

    /// After `close()`: reads and drops what the peer still sends, until its end of stream (then
    /// the connection closes once its output is out) or `lingerLimit` bytes.
    private func discardInput() {
        let scratch = readScratch
        let socket = transport.socket
        let (failure, ended) = readUntilDrained { index in
            guard index < LoopConnection.readsPerWakeUp, core.discarded <= LoopConnection.lingerLimit else {
                return nil
            }
            let read = socket.receive(into: scratch)
            if case .done(let count) = read { core.discarded += count }
            return (read, scratch.count)
        }
        if let failure {
            fail("read from \(remoteAddress)", failure)
            return
        }
        // The peer has ended its stream (or sent too much): closing waits only for the output.
        if ended || core.discarded > LoopConnection.lingerLimit { apply(.peerEnded) }
    }

    // MARK: Writing

    /// The bytes queued and not sent yet.
    var queuedBytes: Int { output.count }

    /// The least of an array's bytes the queue holds by reference rather than copies: below it a
    /// copy costs less than the block and the box that keep the array.
    static let referencedRestMinimum = 4 * 1024

    /// Sends `bytes` at once if nothing is queued and the connection has not sent yet in this pass
    /// of its loop, and queues a copy of the rest (`LoopConnection+Flush.swift`).
    func queueOutput(_ bytes: UnsafeRawBufferPointer) {
        queueOutput(bytes, of: { nil })
    }

    /// `queueOutput` of the bytes of `array`; a large rest is queued by reference, not copied. A
    /// bulk writer's 64 KiB writes, copied, cost a fresh block each, which malloc returned to the
    /// kernel when it was freed (an madvise per write).
    func queueOutput(_ array: [UInt8]) {
        array.withUnsafeBytes { queueOutput($0, of: { array }) }
    }

    /// `bytes`: the bytes to write; `array`: the array they are the whole of, if they are, asked
    /// for only when a large rest is to be queued (a write the socket takes whole, the usual
    /// case, pays no dynamic cast for it).
    func queueOutput(_ bytes: UnsafeRawBufferPointer, of array: () -> [UInt8]?) {
        assertOnLoopThread()
        guard acceptsOutput, bytes.count > 0 else { return }
        let route = writeRoute()
        let outcome = transport.write(bytes, sendingNow: route == .send, for: self)
        if case .sent(let sent) = outcome {
            if sent > 0 { core.lastActivity = LoopConnection.coarseNow }
            if sent < bytes.count {
                if bytes.count - sent >= LoopConnection.referencedRestMinimum, let array = array() {
                    output.append(array, from: sent)
                } else {
                    output.append(UnsafeRawBufferPointer(rebasing: bytes[sent...]))
                }
                didQueue(route)
            }
        } else if !queued(outcome, route) {
            return
        }
        outputDidChange()
    }

    /// Moves the bytes of `buffer` to the output, sending first what the socket takes if nothing
    /// is queued and the connection has not sent yet in this pass of its loop.
    func queueOutput(_ buffer: EventBuffer) {
        assertOnLoopThread()
        guard acceptsOutput, buffer.count > 0 else { return }
        let route = writeRoute()
        let outcome = transport.write(buffer, sendingNow: route == .send, for: self)
        if case .sent(let sent) = outcome {
            if sent > 0 { core.lastActivity = LoopConnection.coarseNow }
            if buffer.count > 0 {
                output.moveAll(from: buffer)
                didQueue(route)
            }
        } else if !queued(outcome, route) {
            return
        }
        outputDidChange()
    }

    /// What a write's outcome other than `sent` asks for: the transport's bytes queued (`rest`),
    /// nothing (`dropped`: false), or the connection closed (false).
    private func queued(_ outcome: WriteOutcome, _ route: WriteRoute) -> Bool {
        switch outcome {
        case .sent:
            return true
        case .encoded(let sent, let rest):
            if sent > 0 { core.lastActivity = LoopConnection.coarseNow }
            if rest.count > 0 {
                output.moveAll(from: rest)
                didQueue(route)
            }
            return true
        case .dropped:
            return false
        case .failed(let failure):
            fail("send to \(remoteAddress)", failure)
            return false
        case .refused(let error):
            apply(.failed(error))
            return false
        }
    }

    /// Bytes a transport made of its own accord (TLS records made while reading or closing) that
    /// the socket did not take at once: queued behind what waits, for when the socket is writable
    /// (dropped once the connection takes no more output).
    func queueEncoded(_ rest: EventBuffer) {
        guard acceptsOutput else {
            rest.drain(rest.count)
            return
        }
        output.moveAll(from: rest)
        didQueue(.queue)
        outputDidChange()
    }

    /// Sends queued output until the socket takes no more.
    func flush() {
        assertOnLoopThread()
        guard sendQueued() else { return }
        output.releaseIfEmpty()
        outputDidChange()
    }

    /// Sends queued output until the socket takes no more (one `writev` a call). False if a
    /// failure closed the connection.
    func sendQueued() -> Bool {
        while queuedBytes > 0 {
            guard let sent = sentCount(SocketOutcome(sent: output.send(to: fileDescriptor))) else { return false }
            if sent == 0 { break }
        }
        return true
    }

    /// What a send gave, the same for every write path: the count sent (0 when the socket takes
    /// nothing now, EAGAIN: the rest stays queued until it turns writable), or nil once the
    /// failure has closed the connection. An interrupted send never gets here: it was made again.
    @inline(__always)
    private func sentCount(_ sent: SocketOutcome) -> Int? {
        switch sent {
        case .done(let count):
            if count > 0 { core.lastActivity = LoopConnection.coarseNow }
            return count
        case .wouldBlock, .endOfStream:
            return 0
        case .failed(let failure):
            fail("send to \(remoteAddress)", failure)
            return nil
        }
    }

    /// After the queue changed: watermarks, and what an empty queue allows (FIN, close).
    func outputDidChange() {
        assertOnLoopThread()
        guard !isClosed else { return }
        var queued = queuedBytes
        if output.updateWatermarks(
            queued: queued, count: queuedCount, below: belowHighWatermark,
            watermarks: { withSettings { $0.watermarks } })
        {
            emit(.writable)
            guard !isClosed else { return }
            outputBecameWritable()
            // The handler may have queued more, then asked for the end of stream (or closed),
            // which must wait for those bytes.
            queued = queuedBytes
        }
        if queued == 0 && !isConnecting { apply(.outputDrained) }
        updateInterest()
    }

    /// Watches what the connection can use now: readability while it may read (or, closing,
    /// while it drops what the peer still sends), writability only while output is queued (or
    /// while connecting).
    func updateInterest() {
        assertOnLoopThread()
        guard !isClosed else { return }
        var wanted: LoopDescriptorSource.Events = []
        if isConnecting {
            wanted = .writable
        } else {
            if core.delivery.isDelivering {
                // While `onRead` runs the input is lent out: not even its count is read here. The
                // interest stays as it is (a write from the handler costs no epoll change; the
                // delivery's caller updates it after), unless a nested run found the socket readable.
                if core.watched.contains(.readable) && !core.delivery.readableIsPending { wanted.insert(.readable) }
            } else if isClosing {
                if !inputEnded { wanted.insert(.readable) }
            } else if !inputEnded && readsOn {
                wanted.insert(.readable)
            } else if !inputEnded {
                // Paused or stalled: no reads, but a reset or the peer's end of stream is seen.
                wanted.insert(.hangUp)
            }
            // Gathered output waits for the end of the pass, not for the socket.
            if queuedBytes > 0 && !output.awaitsPassFlush { wanted.insert(.writable) }
        }
        guard wanted != core.watched else { return }
        core.watched = wanted
        descriptorSource.events = wanted
    }

    // MARK: Closing

    func fail(_ call: String, _ failure: Errno) {
        apply(.failed(.systemCall(call, failedWith: failure)))
    }

    /// The source went away without the connection closing it (the loop's thread exited, or
    /// epoll refused it).
    func sourceWasInvalidated() {
        apply(.sourceInvalidated)
    }

    func emit(_ event: Event) {
        // The other events are of the moment: no handler, no event (`readClosed` is kept:
        // `reportEndOfStream`).
        core.eventHandler?(self, event)
    }

    /// Tells the event handler of a `readClosed` reported before it was set, if it was not told yet.
    func tellUnheardReadClosed() {
        guard let handler = core.eventHandler, core.endOfStream.tell() else { return }
        handler(self, .readClosed)
    }

    // MARK: Settings, as the loop thread reads them

    /// Whether reading is paused: by `isReadingPaused`, or by the output while it is at or above
    /// the high watermark (`pausesReadingWhileUnwritable`).
    var isPaused: Bool {
        let switches = self.switches
        return switches.contains(.readingPaused)
            || (switches.contains(.pausesWhileUnwritable) && !belowHighWatermark.load(ordering: .relaxed))
    }
    var currentInputLimit: Int { withSettings { $0.inputLimit } }
    /// Whether reading goes on: not paused, and the input below its limit (one look at the
    /// settings).
    @inline(__always)
    private var readsOn: Bool {
        guard !isPaused else { return false }
        // Every limit is 1 or more: an empty input, the usual case, is below it.
        let count = input.count
        return count == 0 || count < currentInputLimit
    }
}

extension LoopDescriptorSource.Events {
    /// Library sources only: while not `readable`, watch for the peer's end of stream and for a
    /// reset without reading (edge-triggered); fired when either may have happened.
    static let hangUp = LoopDescriptorSource.Events(rawValue: 1 << 2)
}
