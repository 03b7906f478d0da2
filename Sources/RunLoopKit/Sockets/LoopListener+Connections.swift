import Synchronization

// A listener for async code: made without an accept handler, it queues the connections it accepts
// for `connections`' consumers, and stops accepting while `IncomingConnections.limit` wait, so
// that a server that falls behind leaves new clients in the kernel's backlog instead of holding
// their connections open.

extension LoopListener {
    /// The connections the listener accepts, in order: `for await connection in
    /// listener.connections`. Each starts on the listener's loop, in its modes, with no handler
    /// set. The stream ends when the listener is invalidated; a consumer's task that is cancelled
    /// ends its own iteration.
    ///
    /// Any thread; only for a listener made without an accept handler
    /// (``init(address:backlog:reusePort:)``): with one it is a programmer error. While 64
    /// connections wait unconsumed, the listener stops accepting (clients wait in the kernel's
    /// backlog) until one is taken. Several iterations share one queue: each connection goes to
    /// one of them. Connections still waiting when the listener is invalidated are closed.
    public var connections: AsyncStream<LoopConnection> {
        guard let incoming else {
            preconditionFailure(
                "RunLoopKit: LoopListener.connections needs a listener made without an accept handler, "
                    + "init(address:backlog:reusePort:)")
        }
        return AsyncStream(unfolding: { await incoming.next() })
    }
}

/// The connections a handler-less listener accepted, waiting for consumers, and the consumers
/// waiting for connections. Any thread, under one lock; `deliver` runs on the loop's thread.
final class IncomingConnections: Sendable {
    /// Connections waiting at which the listener stops accepting.
    static let limit = 64

    private struct State {
        var waiting: [LoopConnection] = []
        var consumers: [CancellableContinuation<LoopConnection?>] = []
        var ended = false
        /// The listener stopped watching its socket because `waiting` reached the limit.
        var paused = false
        /// The listener, to pause and resume: weak, it owns this queue.
        weak var listener: LoopListener?
    }

    private let state = Locked(State())

    /// Set once, by the listener's init, before the listener is shared.
    func attach(to listener: LoopListener) { state.withLock { $0.listener = listener } }

    /// Whether `limit` connections wait unconsumed.
    var isFull: Bool { waitingCount >= Self.limit }

    /// How many connections wait unconsumed.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Loop thread: a connection accepted, to the oldest consumer still waiting, else queued; at
    /// the limit the listener stops watching its socket.
    func deliver(_ connection: LoopConnection) {
        while true {
            let (consumer, ended, pause) = state.withLock { state in
                if state.ended { return (nil as CancellableContinuation<LoopConnection?>?, true, nil as LoopListener?) }
                if !state.consumers.isEmpty { return (state.consumers.removeFirst(), false, nil) }
                state.waiting.append(connection)
                guard state.waiting.count >= Self.limit, !state.paused else { return (nil, false, nil) }
                state.paused = true
                return (nil, false, state.listener)
            }
            if let consumer {
                // A consumer cancelled meanwhile gives the connection to the next.
                if consumer.resume(with: .success(connection)) { return }
                continue
            }
            if ended { connection.close() }
            pause?.descriptorSource.events = []
            return
        }
    }

    /// The next connection, waiting for one; nil once the listener is invalidated or the task is
    /// cancelled.
    func next() async -> LoopConnection? {
        guard !Task.isCancelled else { return nil }
        let waiter = CancellableContinuation<LoopConnection?>()
        let taken = try? await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard waiter.wait(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                take(for: waiter)
            }
        } onCancel: {
            waiter.cancel()
        }
        return taken ?? nil
    }

    private func take(for waiter: CancellableContinuation<LoopConnection?>) {
        let (connection, resume) = state.withLock { state -> (LoopConnection??, LoopListener?) in
            guard !state.waiting.isEmpty else {
                if state.ended { return (.some(nil), nil) }
                state.consumers.append(waiter)
                return (nil, nil)
            }
            let first = state.waiting.removeFirst()
            guard state.paused, state.waiting.count < Self.limit else { return (first, nil) }
            state.paused = false
            return (first, state.listener)
        }
        if let connection, !waiter.resume(with: .success(connection)), let connection {
            // Cancelled as it was taken: back at the head of the queue, for the next consumer.
            deliverFirst(connection)
        }
        resume?.descriptorSource.events = .readable
    }

    /// A connection taken for a consumer that was cancelled meanwhile: first again.
    private func deliverFirst(_ connection: LoopConnection) {
        let consumer = state.withLock { state -> CancellableContinuation<LoopConnection?>? in
            if !state.consumers.isEmpty { return state.consumers.removeFirst() }
            state.waiting.insert(connection, at: 0)
            return nil
        }
        if let consumer, !consumer.resume(with: .success(connection)) { deliverFirst(connection) }
    }

    /// The listener was invalidated or released: consumers get nil, waiting connections are closed.
    func end() {
        let (consumers, waiting) = state.withLock { state in
            state.ended = true
            defer {
                state.consumers = []
                state.waiting = []
            }
            return (state.consumers, state.waiting)
        }
        for consumer in consumers { consumer.resume(with: .success(nil)) }
        for connection in waiting { connection.close() }
    }
}
