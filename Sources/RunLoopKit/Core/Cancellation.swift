import Synchronization

/// Set by an awaiting call's task cancellation handler, which runs on whatever thread cancelled the
/// task; read on the loop's thread. The call's loop-side registration and the handler's hop to the
/// loop may arrive in either order: the registration reads the flag, so a cancellation that came
/// first is not missed, and the hop finds a call still waiting by its flag.
final class CancellationFlag: Sendable {
    private let cancelled = Atomic<Bool>(false)

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() { cancelled.store(true, ordering: .releasing) }
}

/// The continuation of an awaiting call that its task's cancellation resumes directly, without a
/// trip to a loop: resumed once, by the first of the result and the cancellation, from any thread.
final class CancellableContinuation<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var cancelled = false
    }

    private let state = Locked(State())

    /// Keeps `continuation`; false if the task was cancelled first (the caller resumes it then).
    func wait(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
        state.withLock { state in
            guard !state.cancelled else { return false }
            state.continuation = continuation
            return true
        }
    }

    /// Whether the caller still waits (neither resumed nor cancelled).
    var isWaiting: Bool { state.withLock { $0.continuation != nil } }

    /// Resumes the caller with `result`; false if it was resumed or cancelled already (then
    /// `result` is left to the caller, for example to give to another waiter).
    @discardableResult
    func resume(with result: Result<T, any Error>) -> Bool {
        guard let continuation = state.withLock({ $0.continuation.take() }) else { return false }
        continuation.resume(with: result)
        return true
    }

    /// The task was cancelled: the caller resumes with `CancellationError`, unless it already has.
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            return state.continuation.take()
        }?.resume(throwing: CancellationError())
    }
}
