internal import CPlatform
import Glibc

// Sending: straight to the kernel on the loop's thread when nothing is queued; otherwise through
// the send queue, which the loop's thread empties in batches (sendmmsg) in the order datagrams
// were queued.

extension LoopDatagramSocket {
    /// Sends a copy of `bytes` to `address` without waiting (see the type's notes on the send
    /// queue). A datagram that cannot be sent is dropped: past ``sendQueueLimit`` it is counted in
    /// ``droppedDatagrams``; an address of another family than the socket's, or a failure of the
    /// kernel (`ENOENT` for a Unix path with no socket, `EMSGSIZE` for a datagram too long,
    /// `ECONNREFUSED`, `ENETUNREACH`), is reported to ``onError(_:)`` as a `LoopError`.
    ///
    /// Any thread; datagrams sent from one thread are sent in the order they were sent. Datagrams
    /// sent before the socket is in a loop wait in its queue until it is added. In `async` code a
    /// `[UInt8]` argument picks the awaiting `send(_:to:)`; another collection (an `ArraySlice`,
    /// `CollectionOfOne`) picks this one.
    public func send(_ bytes: some Collection<UInt8>, to address: SocketAddress) {
        do throws(LoopError) {
            try checkFamily(of: address, for: "send to")
        } catch {
            report(error)
            return
        }
        if sendsDirectly() {
            let sent =
                bytes.withContiguousStorageIfAvailable { bytes in
                    Platform.sendDatagram(fileDescriptor, UnsafeRawBufferPointer(bytes), to: address)
                } ?? Array(bytes).withUnsafeBytes { Platform.sendDatagram(fileDescriptor, $0, to: address) }
            switch sent {
            case .success: return
            case .failure(let failure) where failure != .wouldBlock:
                report(sendError(failure, to: address))
                return
            default: break
            }
        }
        enqueue(copying: bytes, to: address, waiter: nil)
    }

    /// Sends `bytes` to `address` and returns once the kernel has taken the datagram (on the
    /// loop's thread with nothing queued, without suspending). Never dropped: it waits in the
    /// send queue, past ``sendQueueLimit`` too, in order with the sends made before it.
    ///
    /// Any thread or task, once the socket is in a loop (a `LoopError` otherwise). Throws a
    /// `LoopError` for an address of another family than the socket's, when the kernel refuses
    /// the datagram (`systemError` set: `ENOENT`, `EMSGSIZE`, `ECONNREFUSED` for a refusal
    /// reported on a connected socket, ...), and when the socket is invalidated before it went.
    /// Cancelling the calling task ends the wait at once with `CancellationError`; a datagram
    /// already queued may still be sent.
    public func send(_ bytes: [UInt8], to address: SocketAddress) async throws {
        try Task.checkCancellation()
        try checkFamily(of: address, for: "send to")
        let (open, loop) = shared.withLock { ($0.lifecycle.isOpen, $0.residency.loop) }
        if !open {
            throw invalidatedError
        } else if let loop {
            if loop.hasEnded { throw LoopError.loopEnded }
        } else {
            throw notInALoopError
        }
        if sendsDirectly() {
            switch bytes.withUnsafeBytes({ Platform.sendDatagram(fileDescriptor, $0, to: address) }) {
            case .success: return
            case .failure(let failure) where failure != .wouldBlock: throw sendError(failure, to: address)
            default: break
            }
        }
        let waiter = CancellableContinuation<Void>()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard waiter.wait(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                enqueue(copying: bytes, to: address, waiter: waiter)
            }
        } onCancel: {
            waiter.cancel()
        }
    }

    /// The error for a datagram to `address` the kernel refused with `failure`.
    func sendError(_ failure: Errno, to address: SocketAddress) -> LoopError {
        LoopError.systemCall("sending a datagram from \(localAddress) to \(address)", failedWith: failure)
    }

    /// Whether a datagram may go to the kernel at once: on the loop's thread, with nothing queued.
    private func sendsDirectly() -> Bool {
        shared.withLock { shared in
            guard shared.outbox.isEmpty, shared.sendState.sendsDirectly, shared.lifecycle.isOpen,
                let loop = shared.residency.loop
            else { return false }
            return loop.isCurrentThread
        }
    }

    /// Queues a copy of `bytes` for `address` (dropped and counted past the limit, unless awaited)
    /// and posts a flush unless one is due anyway.
    private func enqueue(
        copying bytes: some Collection<UInt8>, to address: SocketAddress, waiter: CancellableContinuation<Void>?
    ) {
        let length = bytes.count
        let storage = malloc(max(length, 1))!
        let copied: Bool? = bytes.withContiguousStorageIfAvailable { source in
            if let base = source.baseAddress { memcpy(storage, base, length) }
            return true
        }
        if copied == nil {
            UnsafeMutableRawBufferPointer(start: storage, count: length).copyBytes(from: bytes)
        }
        enqueue(storage, length: length, to: address, waiter: waiter)
    }

    private func enqueue(
        _ storage: UnsafeMutableRawPointer, length: Int, to address: SocketAddress,
        waiter: CancellableContinuation<Void>?
    ) {
        var datagram = rlk_outgoing()
        datagram.bytes = UnsafeRawPointer(storage)
        datagram.length = length
        address.bytes.withUnsafeBytes { raw in
            withUnsafeMutableBytes(of: &datagram.address) { $0.copyMemory(from: raw) }
        }
        datagram.address_length = socklen_t(address.bytes.count)

        enum Outcome {
            case queued
            case posted(Loop)
            case dropped, invalidated
        }
        let outcome = shared.withLock { shared -> Outcome in
            guard shared.lifecycle.isOpen else { return .invalidated }
            if waiter == nil {
                guard shared.queued < shared.sendQueueLimit else { return .dropped }
                shared.queued += 1
            }
            shared.outbox.append(datagram, waiter)
            let loop = shared.residency.loop
            guard shared.sendState.datagramsWaiting(inLoop: loop != nil) == .postFlush, let loop else { return .queued }
            return .posted(loop)
        }
        switch outcome {
        case .queued: break
        case .posted(let loop): hop(to: loop) { self.flush() }
        case .dropped:
            free(storage)
            dropped.add(1, ordering: .relaxed)
        case .invalidated:
            free(storage)
            waiter?.resume(with: .failure(invalidatedError))
        }
    }

    /// Loop thread: the socket has room again.
    func writable() {
        if shared.withLock({ $0.sendState.becameWritable() }) == .flush { flush() }
    }

    /// Loop thread: sends what the queue holds, in order, in batches, until it is empty or the
    /// kernel's buffer is full (then the rest waits for the socket to be writable). The send
    /// state decides each step (`LoopDatagramSocket+State.swift`).
    func flush() {
        var batch = Outbox()
        while true {
            let began = shared.withLock { shared -> SendState.Effect in
                let effect = shared.sendState.flushBegan(hasWork: !shared.outbox.isEmpty && shared.lifecycle.isOpen)
                if effect == .sendBatch { swap(&batch, &shared.outbox) }
                return effect
            }
            guard began == .sendBatch else { break }
            let first = batch.head
            let (done, blocked) = send(batch)
            let unawaited = batch.waiters[first..<done].reduce(0) { $1 == nil ? $0 + 1 : $0 }
            batch.markDone(upTo: done)
            let sent = shared.withLock { shared -> SendState.Effect in
                shared.queued = max(0, shared.queued - unawaited)
                let effect = shared.sendState.batchSent(blocked: blocked, open: shared.lifecycle.isOpen)
                if effect == .waitForWritable {
                    // The rest goes back before what was queued meanwhile, without being moved.
                    batch.append(pendingOf: shared.outbox)
                    swap(&batch, &shared.outbox)
                }
                return effect
            }
            switch sent {
            case .waitForWritable:
                updateInterest()
                return
            case .discardBatch:
                discard(batch)
                updateInterest()
                return
            default:
                batch.removeAll()
            }
        }
        updateInterest()
    }

    /// Sends the pending datagrams of `batch` in order with up to 64 datagrams per call, each one
    /// sent or failed freed and its waiter resumed: the index up to which they are done, and
    /// whether the kernel's buffer filled up (the rest from there on is untouched).
    private func send(_ batch: Outbox) -> (done: Int, blocked: Bool) {
        var done = batch.head
        var failures: [LoopError] = []
        defer { for error in failures { report(error) } }
        while done < batch.datagrams.count {
            let count = min(batch.datagrams.count - done, Platform.datagramBatchLimit)
            let result = batch.datagrams.withUnsafeBufferPointer { all in
                Platform.sendDatagrams(fileDescriptor, all.baseAddress! + done, count: count)
            }
            switch result {
            case .success(let sent):
                for index in done..<(done + sent) { complete(batch, index, with: nil) }
                done += sent
            case .failure(let failure) where failure == .wouldBlock:
                return (done, true)
            case .failure(let failure):
                // The first one failed: it is dropped (reported), and the rest go on.
                let address = SocketAddress(
                    storage: batch.datagrams[done].address, length: batch.datagrams[done].address_length)
                let error = sendError(failure, to: address)
                if batch.waiters[done] == nil { failures.append(error) }
                complete(batch, done, with: error)
                done += 1
            }
        }
        return (done, false)
    }

    private func complete(_ batch: Outbox, _ index: Int, with error: LoopError?) {
        free(UnsafeMutableRawPointer(mutating: batch.datagrams[index].bytes))
        batch.waiters[index]?.resume(with: error.map { .failure($0) } ?? .success(()))
    }

    /// Frees what `outbox` holds and ends its waiters: the socket was invalidated meanwhile.
    private func discard(_ outbox: Outbox) {
        for index in outbox.pending { complete(outbox, index, with: invalidatedError) }
    }
}
