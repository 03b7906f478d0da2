import Dispatch
import Synchronization

/// One piece of work queued on a ``LoopWorkPool``: the handle `run` returns, to cancel it.
///
/// Thread rules: any thread.
public final class LoopWork: @unchecked Sendable {
    enum Phase {
        case queued, running, finished, cancelled
    }

    private let core: LoopWorkPool.Core
    /// When it was queued: the start of its queue delay.
    let queuedAt: ContinuousClock.Instant
    /// Guarded by the pool's lock (`core.state`), which makes the runtime's exclusivity checks
    /// redundant: reached through `guarded`, which checks the lock in debug builds.
    @exclusivity(unchecked) private var uncheckedGuarded: Guarded

    /// What the pool's lock guards.
    private struct Guarded {
        var phase = Phase.queued
        /// The work; its outcome carries the delivery of the result.
        var job: (@Sendable () -> Job.Outcome)?
        /// Delivers the reason the work never ran.
        var onAbandon: (@Sendable (any Error) -> Void)?
    }

    init(
        core: LoopWorkPool.Core, job: @escaping @Sendable () -> Job.Outcome,
        abandon: @escaping @Sendable (any Error) -> Void
    ) {
        self.core = core
        self.queuedAt = .now
        self.uncheckedGuarded = Guarded(job: job, onAbandon: abandon)
    }

    /// Under the pool's lock (checked in debug builds).
    private var guarded: Guarded {
        _read {
            assertPoolLocked()
            yield uncheckedGuarded
        }
        _modify {
            assertPoolLocked()
            yield &uncheckedGuarded
        }
    }

    @inline(__always)
    private func assertPoolLocked() {
        assert(core.state.isLocked, "RunLoopKit: LoopWork's state touched without its pool's lock")
    }

    /// Under the pool's lock: whether it is queued, running, finished or cancelled.
    var phase: Phase { guarded.phase }

    /// Cancels the work if it has not started: it then never runs, and its completion reports
    /// `CancellationError` (delivered like any completion). Returns false if the work had already
    /// started (it then runs to the end and completes normally), finished, or been cancelled.
    ///
    /// Any thread. Once this has returned true, the work does not run.
    @discardableResult
    public func cancel() -> Bool {
        let abandon = core.state.withLock { state in
            guard guarded.phase == .queued else { return nil as (@Sendable (any Error) -> Void)? }
            state.metrics.queued -= 1
            state.metrics.cancelled += 1
            return markCancelled()
        }
        abandon?(CancellationError())
        return abandon != nil
    }

    /// Under the pool's lock: marks the work started and hands out its job.
    func start() -> (@Sendable () -> Job.Outcome)? {
        guard guarded.phase == .queued else { return nil }
        guarded.phase = .running
        guarded.onAbandon = nil
        return guarded.job.take()
    }

    /// Under the pool's lock: marks the work cancelled and hands out what delivers the reason,
    /// to be called outside the lock (the delivery may post to a loop).
    func markCancelled() -> @Sendable (any Error) -> Void {
        guarded.phase = .cancelled
        guarded.job = nil
        return guarded.onAbandon.take()!
    }
}

extension LoopWorkPool {
    /// What a pool has done and is doing: counts since it started, and the work waiting and
    /// running now. A value: read ``LoopWorkPool/metrics`` for a snapshot.
    public struct Metrics: Sendable, Equatable {
        /// Work accepted by `run` (not counting work refused after shutdown).
        public var submitted: UInt64 = 0
        /// Work that ran to the end, returning or throwing.
        public var completed: UInt64 = 0
        /// Of `completed`, the work that threw.
        public var failed: UInt64 = 0
        /// Work cancelled before it started, by `cancel()` or by `shutdown()`.
        public var cancelled: UInt64 = 0
        /// `run` calls refused because the pool had shut down.
        public var rejected: UInt64 = 0
        /// Completions released without running because their loop had ended.
        public var droppedCompletions: UInt64 = 0
        /// Work queued and not started yet.
        public var queued = 0
        /// Work running now.
        public var running = 0
        /// Time from `run` to the start of the work, summed over the work started.
        public var totalQueueDelay: Duration = .zero
        /// The longest such wait.
        public var maxQueueDelay: Duration = .zero
        /// Time the work ran, summed over the work completed.
        public var totalRunTime: Duration = .zero
        /// The longest run.
        public var maxRunTime: Duration = .zero

        /// The mean queue delay of the work started so far, nil before any started.
        public var averageQueueDelay: Duration? {
            let started = UInt64(running) + completed
            return started == 0 ? nil : totalQueueDelay / Int(started)
        }
    }

    /// What the pool's threads and its callers share.
    final class Core: Sendable {
        struct State {
            /// FIFO: `queue[head...]` waits; cancelled entries stay until a thread passes them.
            var queue: [LoopWork] = []
            var head = 0
            var isShutdown = false
            var metrics = Metrics()

            mutating func popFirst() -> LoopWork? {
                queue.takeFirst(head: &head)
            }

            /// Marks every queued work cancelled, emptying the queue; returns what delivers the
            /// reason to each.
            mutating func takeQueued() -> [@Sendable (any Error) -> Void] {
                let waiting = queue[head...].filter { $0.phase == .queued }.map { $0.markCancelled() }
                metrics.cancelled += UInt64(waiting.count)
                metrics.queued = 0
                queue = []
                head = 0
                return waiting
            }
        }

        let name: String
        let state = Locked(State())
        /// Signalled once per queued work and once per thread at shutdown.
        let wakeups = DispatchSemaphore(value: 0)

        init(name: String) {
            self.name = name
        }

        /// Queues `work`, or abandons it with a `LoopError` if the pool has shut down.
        func enqueue(_ work: LoopWork) {
            let refused = state.withLock { state -> (@Sendable (any Error) -> Void)? in
                guard !state.isShutdown else {
                    state.metrics.rejected += 1
                    return work.markCancelled()
                }
                state.queue.append(work)
                state.metrics.queued += 1
                state.metrics.submitted += 1
                return nil
            }
            if let refused {
                refused(LoopError("LoopWorkPool \"\(name)\" has shut down; it runs no more work"))
            } else {
                wakeups.signal()
            }
        }

        /// A pool thread's life: runs work until the pool shuts down.
        func serve() {
            while true {
                wakeups.wait()
                var job: (@Sendable () -> Job.Outcome)?
                let stop = state.withLock { state in
                    while job == nil, let work = state.popFirst() {
                        // nil: cancelled while it waited.
                        job = work.start()
                        guard job != nil else { continue }
                        let delay = ContinuousClock.now - work.queuedAt
                        state.metrics.queued -= 1
                        state.metrics.running += 1
                        state.metrics.totalQueueDelay += delay
                        state.metrics.maxQueueDelay = max(state.metrics.maxQueueDelay, delay)
                    }
                    return job == nil && state.isShutdown
                }
                if stop { return }
                guard let job else { continue }
                let started = ContinuousClock.now
                let outcome = job()
                let runTime = ContinuousClock.now - started
                state.withLock { state in
                    state.metrics.running -= 1
                    state.metrics.completed += 1
                    if !outcome.succeeded { state.metrics.failed += 1 }
                    state.metrics.totalRunTime += runTime
                    state.metrics.maxRunTime = max(state.metrics.maxRunTime, runTime)
                }
                // Counted first: a completion that reads the pool's metrics sees its own work.
                outcome.deliver()
            }
        }
    }

    /// Travels with a completion posted to a loop: released without having run, the loop ended
    /// before it could run it, and the pool counts the completion as dropped.
    final class CompletionReceipt: Sendable {
        private let core: Core
        private let delivered = Atomic<Bool>(false)

        init(_ core: Core) { self.core = core }

        func markDelivered() { delivered.store(true, ordering: .relaxed) }

        deinit {
            guard !delivered.load(ordering: .relaxed) else { return }
            core.state.withLock { $0.metrics.droppedCompletions += 1 }
        }
    }
}

/// What a pool thread runs for one piece of work.
enum Job {
    /// The work ran: whether it succeeded, and the delivery of its result (made after the pool
    /// has counted it).
    struct Outcome: Sendable {
        let succeeded: Bool
        let deliver: @Sendable () -> Void
    }
}
