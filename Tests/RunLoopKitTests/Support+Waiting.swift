// Shared test helpers: deadlocks and cancelled calls.
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

// MARK: Deadlocks

/// Runs `body` on a new thread and waits up to `limit` for it to return; returns whether it did.
/// A deadlock then fails the test that asked instead of hanging the suite (the stuck thread is
/// left behind).
func returns(within limit: Duration = .seconds(30), _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread {
        body()
        done.signal()
    }.start()
    let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
    return done.wait(timeout: .now() + seconds) == .success
}

/// An object a handler captures whose deinit runs `onDeinit`: set it to call back into the item,
/// its loop or another item, which must not deadlock however the handler is released.
final class CallsBack: @unchecked Sendable {
    var onDeinit: (() -> Void)?
    private(set) var ran = false
    deinit { onDeinit?() }
    func touch() { ran = true }
}

// MARK: Cancellation

/// How a cancelled call ended: its outcome, how long after the cancel, and whether the test had
/// to unblock it (it ignored the cancellation for `limit`).
struct CancelledCall<T: Sendable>: Sendable {
    let result: Result<T, any Error>
    let elapsed: Duration
    let unblocked: Bool

    var threwCancellation: Bool {
        if case .failure(let error) = result { return error is CancellationError }
        return false
    }
}

/// Starts `operation` in a task, cancels the task after `delay` (the call waits by then), and
/// returns how it ended. A call still running `limit` after the cancel is unblocked with
/// `unblock` (abort the connection, open a gate), so that a call that ignores cancellation fails
/// the test instead of hanging it.
func cancelWhileWaiting<T: Sendable>(
    after delay: Duration = .milliseconds(100), within limit: Duration = .seconds(2),
    unblock: @escaping @Sendable () -> Void, _ operation: @escaping @Sendable () async throws -> T
) async -> CancelledCall<T> {
    await timedCall(cancelAfter: delay, within: limit, unblock: unblock, operation)
}

/// Runs `operation` in a task (cancelled after `delay`, if one is given) and returns how it ended
/// and how long after the start (or the cancel) it did, unblocking it with `unblock` after
/// `limit`. The task runs on a loop thread of its own, and its end and the limit are timed there:
/// on a loaded machine the cooperative threads may all be busy with other tests for seconds.
func timedCall<T: Sendable>(
    cancelAfter delay: Duration?, within limit: Duration, unblock: @escaping @Sendable () -> Void,
    _ operation: @escaping @Sendable () async throws -> T
) async -> CancelledCall<T> {
    let runner = LoopThread(name: "timed-call")
    defer { runner.stop() }
    let ended = Locked<(result: Result<T, any Error>, at: ContinuousClock.Instant)?>(nil)
    let unblocked = Locked(false)
    let started = Locked(ContinuousClock.now)
    let task = Task(executorPreference: runner.loop) {
        let outcome = await result { try await operation() }
        ended.withLock { $0 = (outcome, .now) }
    }
    // The cancel and the limit on the runner's loop too, not after a sleep of the test's task.
    let loop = runner.loop
    let watch = { @Sendable in
        _ = loop.schedule(after: limit) {
            guard ended.withLock({ $0 == nil }) else { return }
            unblocked.withLock { $0 = true }
            unblock()
        }
    }
    if let delay {
        loop.schedule(after: delay) {
            started.withLock { $0 = .now }
            task.cancel()
            watch()
        }
    } else {
        loop.perform { watch() }
    }
    await task.value
    let (outcome, end) = ended.withLock { $0! }
    let start = started.withLock { $0 }
    return CancelledCall(result: outcome, elapsed: end - start, unblocked: unblocked.withLock { $0 })
}

/// The outcome of `body`, thrown or returned.
func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
