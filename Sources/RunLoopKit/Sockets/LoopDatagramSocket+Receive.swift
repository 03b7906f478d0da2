internal import CPlatform
import Glibc

// Receiving: batches read with recvmmsg on the loop's thread, handed to waiting `receive()` calls
// first, then to the handler.

extension LoopDatagramSocket {
    /// Datagrams read per system call, at most.
    static let receiveBatch = 32
    /// System calls per wake-up, at most: a flood leaves the loop's other items their turn.
    static let receiveCallsPerWakeUp = 4
    /// The receive buffer's size, at most (fewer slots for large datagrams).
    static let receiveBufferLimit = 1 << 20

    /// Waits for the next datagram and returns it with its sender's address.
    ///
    /// Any thread or task, once the socket is in a loop (a `LoopError` otherwise). Waiting calls
    /// are served in the order they were made, before ``onReceive(_:)``. Throws a `LoopError` for
    /// a datagram that was truncated (`systemError` `EMSGSIZE`; it is dropped), for a refusal on
    /// a connected socket (`ECONNREFUSED`), and once the socket is invalidated (also while the
    /// call waits). Cancelling the calling task ends the wait at once with `CancellationError`
    /// and takes no datagram (one read for it goes to the next call or to the handler).
    public func receive() async throws -> (bytes: [UInt8], from: SocketAddress) {
        try Task.checkCancellation()
        let waiter = CancellableContinuation<Datagram>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard waiter.wait(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                startReceiving(waiter)
            }
        } onCancel: {
            waiter.cancel()
            // A datagram already read for it is kept in `held`; the handler gets it.
            updateInterest()
        }
    }

    private func startReceiving(_ waiter: CancellableContinuation<Datagram>) {
        let ready = shared.withLock { shared -> Result<Datagram, LoopError>? in
            guard shared.lifecycle.isOpen else { return .failure(invalidatedError) }
            guard let loop = shared.residency.loop else { return .failure(notInALoopError) }
            if loop.hasEnded { return .failure(.loopEnded) }
            if !shared.held.isEmpty { return shared.held.removeFirst() }
            shared.receivers.append(waiter)
            return nil
        }
        if let ready {
            waiter.resume(with: ready.mapError { $0 })
        } else {
            updateInterest()
        }
    }

    /// Loop thread: the socket is readable. Reads batches while datagrams are wanted.
    func readable() {
        // A nested run inside a handler: the batch being delivered is in the receive buffer, so
        // reading waits until the delivery is done (and stops being watched meanwhile, so that
        // the nested run does not spin on it).
        guard delivery.readable() else {
            descriptorSource.events.subtract(.readable)
            return
        }
        _ = delivery.begin()  // idle, as `readable()` said: it begins
        defer { if delivery.end() { updateInterest() } }
        for _ in 0..<LoopDatagramSocket.receiveCallsPerWakeUp {
            let (handler, wanted, size, older) = shared.withLock { shared in
                shared.receivers.removeAll { !$0.isWaiting }
                let wanted =
                    shared.lifecycle.isOpen
                    && (shared.receiveHandler != nil || (!shared.receivers.isEmpty && shared.held.isEmpty))
                // Datagrams kept for cancelled `receive()` calls go to a handler before newer ones.
                var older: [Result<Datagram, LoopError>] = []
                if shared.receiveHandler != nil && !shared.held.isEmpty { swap(&older, &shared.held) }
                return (shared.receiveHandler, wanted, shared.maximumDatagramSize, older)
            }
            for item in older {
                deliver(item, handler)
                guard isValid else { return }
            }
            guard wanted else {
                updateInterest()
                return
            }
            let slots = prepareReceiveBuffer(slotSize: size)
            let buffer = receiveBuffer!
            let info = receivedInfo!
            let got: Int
            switch Platform.receiveDatagrams(fileDescriptor, into: buffer, slotSize: size, info, count: slots) {
            case .success(let count):
                got = count
            case .failure(let failure):
                // A refusal reported on a connected socket, or a failure of the socket itself.
                let error: LoopError
                if failure.code == ECONNREFUSED, let peer = remoteAddress {
                    error = LoopError("\(peer) refused the datagrams sent to it: \(failure)", systemError: failure.code)
                } else {
                    error = LoopError.systemCall("recvmmsg on \(localAddress)", failedWith: failure)
                }
                deliver(.failure(error), handler)
                continue
            }
            for index in 0..<got {
                let entry = info[index]
                let sender = SocketAddress(storage: entry.address, length: entry.address_length)
                if entry.truncated != 0 {
                    truncated.add(1, ordering: .relaxed)
                    let error = LoopError(
                        "a datagram of \(entry.length) bytes from \(sender) is longer than maximumDatagramSize (\(size)): dropped",
                        systemError: EMSGSIZE)
                    deliver(.failure(error), handler)
                } else {
                    let start = buffer + index * size
                    let bytes = Array(UnsafeRawBufferPointer(start: start, count: entry.length))
                    deliver(.success((bytes, sender)), handler)
                }
                guard isValid else { return }
            }
            if got < slots { return }
        }
    }

    /// Gives `item` to the oldest waiting `receive()`, else to the handler (an error to the error
    /// handler), else keeps it for the next `receive()`.
    private func deliver(_ item: Result<Datagram, LoopError>, _ handler: ReceiveHandler?) {
        while let receiver = shared.withLock({ $0.receivers.isEmpty ? nil : $0.receivers.removeFirst() }) {
            if receiver.resume(with: item.mapError { $0 }) { return }
        }
        switch item {
        case .success(let datagram):
            if let handler {
                handler(self, datagram.bytes, datagram.from)
                return
            }
        case .failure(let error):
            if let errorHandler = shared.withLock({ $0.errorHandler }) {
                errorHandler(self, error)
                return
            }
            if handler != nil { return }
        }
        shared.withLock { $0.held.append(item) }
    }

    /// Loop thread, in the socket's modes: hands datagrams kept for cancelled `receive()` calls
    /// to a handler set since.
    func deliverHeld() {
        while let (item, handler) = shared.withLock({ shared -> (Result<Datagram, LoopError>, ReceiveHandler?)? in
            guard shared.receiveHandler != nil || !shared.receivers.isEmpty, !shared.held.isEmpty else { return nil }
            return (shared.held.removeFirst(), shared.receiveHandler)
        }) {
            deliver(item, handler)
            guard isValid else { return }
        }
        updateInterest()
    }

    /// Loop thread: the receive buffer, with slots of `slotSize` bytes; how many slots it has.
    private func prepareReceiveBuffer(slotSize: Int) -> Int {
        if receiveBuffer == nil || receiveSlotSize != slotSize {
            receiveBuffer?.deallocate()
            receiveSlots = max(
                1, min(LoopDatagramSocket.receiveBatch, LoopDatagramSocket.receiveBufferLimit / slotSize))
            receiveSlotSize = slotSize
            receiveBuffer = .allocate(byteCount: receiveSlots * slotSize, alignment: 16)
        }
        if receivedInfo == nil {
            receivedInfo = .allocate(capacity: LoopDatagramSocket.receiveBatch)
        }
        return receiveSlots
    }
}
