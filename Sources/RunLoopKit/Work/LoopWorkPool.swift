import Dispatch
import Glibc
import Synchronization

/// A fixed set of threads that run blocking work off the loops (file I/O, name resolution, a
/// CPU-heavy step), first in, first out, and hand each result back to a loop's thread.
///
/// Each pool owns its threads: several named pools coexist, and a pool whose work is slow never
/// delays another pool's work. Use one pool per kind of work whose latency matters on its own.
///
/// ```swift
/// let disk = LoopWorkPool(name: "disk", threads: 2)
/// disk.run({ try readConfiguration() }, completingOn: Loop.current, inModes: [.default]) { result in
///     apply(result)   // on the loop's thread, when it runs .default
/// }
/// ```
///
/// Thread rules: every member may be called from any thread. Work runs on one of the pool's
/// threads; a completion runs on the loop's thread named in `run`. A pool that is dropped shuts
/// down (``shutdown()``).
public final class LoopWorkPool: Sendable {
    /// The pool's name; its threads are named `name-0`, `name-1`, … (the kernel keeps 15 bytes).
    ///
    /// Any thread.
    public let name: String
    /// How many threads the pool runs work on.
    ///
    /// Any thread.
    public let threadCount: Int

    let core: Core
    private let threads: [Platform.Thread]
    /// Entered at start, left once `shutdown()` has joined the threads: later callers wait on it.
    private let joined = DispatchGroup()

    /// The pool shared by the library and by code that has no pool of its own: four threads,
    /// started on first use. Work that may block for long (a slow disk, a remote call) belongs in
    /// a pool of its own, so that it does not hold up short work queued behind it here.
    ///
    /// Any thread. Shutting it down is allowed but makes every later `run` on it fail.
    public static let shared = LoopWorkPool(name: "rlk-work", threads: 4)

    /// Starts `threads` threads named `name-0`, `name-1`, … that wait for work.
    ///
    /// Any thread. `threads` must be at least 1.
    public init(name: String, threads: Int) {
        precondition(threads >= 1, "RunLoopKit: a LoopWorkPool needs at least one thread (got \(threads))")
        self.name = name
        self.threadCount = threads
        let core = Core(name: name)
        self.core = core
        var started: [Platform.Thread] = []
        for index in 0..<threads {
            started.append(LoopWorkPool.startThread(core, name: LoopThread.kernelName("\(name)-\(index)")))
        }
        self.threads = started
        joined.enter()
    }

    deinit {
        shutdown()
    }

    // MARK: Running work

    /// Runs `work` on a pool thread, then `completion` with its result on `loop`'s thread, the
    /// next time the loop runs in one of `modes` (`.common`: any mode of the common set).
    ///
    /// Any thread. Work starts in the order it was queued. A completion waits for its modes like
    /// any block posted with `perform(inModes:)`: a loop running `.tracking` does not deliver a
    /// `.default`-only completion, which runs once the loop runs `.default` again. The completion
    /// reports `CancellationError` if the work was cancelled before it started (``LoopWork/cancel()``
    /// or ``shutdown()``), and a `LoopError` at once if the pool had already shut down. A
    /// completion whose loop has ended is released without running (never on another thread) and
    /// counted in ``Metrics/droppedCompletions``.
    @discardableResult
    public func run<T: Sendable>(
        _ work: @escaping @Sendable () throws -> T,
        completingOn loop: Loop, inModes modes: [Loop.Mode] = [.common],
        _ completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) -> LoopWork {
        precondition(
            !modes.isEmpty, "RunLoopKit: run(_:completingOn:inModes:_:) needs at least one mode for its completion")
        let core = self.core
        return submit(work) { result in
            // The receipt goes with the block: released unrun (the loop ended before or after
            // accepting it), it counts the completion as dropped.
            let receipt = CompletionReceipt(core)
            loop.perform(inModes: modes) {
                receipt.markDelivered()
                completion(result)
            }
        }
    }

    /// Runs `work` on a pool thread and returns its result or error.
    ///
    /// Any thread or task. Throws a `LoopError` at once if the pool has shut down. Cancelling the
    /// calling task makes this throw `CancellationError` at once: work that has not started is
    /// cancelled and never runs; work that has started runs to the end on its pool thread and its
    /// result is dropped. A task already cancelled throws at once and queues nothing.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        let waiter = CancellableContinuation<T>()
        let queued = Locked<LoopWork?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                guard waiter.wait(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let item = submit(work) { waiter.resume(with: $0) }
                queued.withLock { $0 = item }
                // Cancelled meanwhile (the handler found no work to cancel yet), or already done.
                if !waiter.isWaiting { item.cancel() }
            }
        } onCancel: {
            waiter.cancel()
            queued.withLock { $0 }?.cancel()
        }
    }

    /// Queues `work`; `deliver` gets its result on the pool thread, or the reason it never ran
    /// on the thread that cancelled it.
    private func submit<T: Sendable>(
        _ work: @escaping @Sendable () throws -> T, deliver: @escaping @Sendable (Result<T, any Error>) -> Void
    ) -> LoopWork {
        let item = LoopWork(
            core: core,
            job: {
                let result = Result { try work() }
                var succeeded = true
                if case .failure = result { succeeded = false }
                return Job.Outcome(succeeded: succeeded) { deliver(result) }
            },
            abandon: { deliver(.failure($0)) })
        core.enqueue(item)
        return item
    }

    /// The work queued and not started yet (cancelled work excluded).
    ///
    /// Any thread; the answer may be stale by the time it is read.
    public var queuedCount: Int { core.state.withLock { $0.metrics.queued } }

    /// What the pool has done so far and what it is doing now: a snapshot.
    ///
    /// Any thread. A pool whose `queued` stays above zero while `running` equals ``threadCount``
    /// is saturated: its queue delay grows.
    public var metrics: Metrics { core.state.withLock { $0.metrics } }

    // MARK: Shutting down

    /// Stops the pool: work already running finishes (and its completion is delivered), queued
    /// work completes with `CancellationError` without running, and every later `run` completes
    /// at once with a `LoopError`. Returns once the pool's threads have exited.
    ///
    /// Any thread; idempotent (a second call also waits for the threads). Called from the pool's
    /// own work, it returns without waiting for that thread, which exits when the work returns.
    public func shutdown() {
        let (first, abandoned) = core.state.withLock { state in
            guard !state.isShutdown else { return (false, [@Sendable (any Error) -> Void]()) }
            state.isShutdown = true
            return (true, state.takeQueued())
        }
        for abandon in abandoned { abandon(CancellationError()) }
        let onPoolThread = threads.contains { Platform.isCurrentThread($0) }
        guard first else {
            // The first caller may be waiting for this very thread to return.
            if !onPoolThread { joined.wait() }
            return
        }
        // One wake-up per thread: each finds the pool shut down and exits.
        for _ in 0..<threadCount { core.wakeups.signal() }
        for thread in threads {
            if Platform.isCurrentThread(thread) {
                // Cannot join itself: its resources go when it exits.
                Platform.detachThread(thread)
            } else {
                Platform.joinThread(thread)
            }
        }
        joined.leave()
    }

    // MARK: Threads

    private static func startThread(_ core: Core, name: String) -> Platform.Thread {
        let started = Platform.startThread {
            Platform.setCurrentThreadName(name)
            core.serve()
        }
        switch started {
        case .success(let thread):
            return thread
        case .failure(let failure):
            preconditionFailure("RunLoopKit: pthread_create failed for LoopWorkPool thread \"\(name)\": \(failure)")
        }
    }
}
