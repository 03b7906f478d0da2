// A loop as a Swift concurrency executor: actors whose `unownedExecutor` is a loop run on its
// thread, and tasks that prefer a loop run their non-isolated code there.
//
// After the loop has ended, its jobs still run: a job the loop refuses is run by the thread that
// enqueued it, one job at a time in enqueueing order (the first such thread runs the jobs other
// threads enqueue meanwhile), so an actor bound to an ended loop stays serial and a task awaiting
// it finishes instead of hanging. Dropping the job would leave its task suspended forever, and
// trapping would crash a server whose tasks are still winding down while its loops stop.

extension Loop: SerialExecutor, TaskExecutor {
    /// Queues a job to run on the loop's thread in its common modes, and wakes the loop like
    /// `perform` (jobs and blocks share one queue, in posting order).
    ///
    /// Any thread. No closure is allocated per job. A job enqueued on a loop that has ended runs on
    /// the enqueuing thread, serially with the other jobs of that loop, instead of being lost; code
    /// isolated to the loop then passes `checkIsolated()` on that thread, but the loop's items are
    /// gone, so such code should only wind down.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        guard !post(LoopBlock(.job(job)), modes: nil) else { return }
        runAfterEnd(job)
    }

    /// Traps, with a plain message, unless called on the loop's thread (or, once the loop has
    /// ended, on the thread running its jobs); makes `assumeIsolated` work for code isolated to
    /// this loop.
    ///
    /// Any thread.
    public func checkIsolated() {
        precondition(
            isIsolatingCurrentContext() == true,
            "RunLoopKit: this code is isolated to a Loop's executor but is running on another thread than the loop's"
        )
    }

    /// Whether the calling thread is the loop's thread (or, once the loop has ended, the thread
    /// running its jobs).
    ///
    /// Any thread.
    public func isIsolatingCurrentContext() -> Bool? {
        isCurrentThread || (hasEnded && afterlife.withLock { $0.isDrainedByCurrentThread })
    }

    /// Runs `body` on the loop's thread (in its common modes) and returns its result or error.
    ///
    /// Any thread or task. Called on the loop's thread it still queues the work (the loop must be
    /// running for it to complete). Throws a `LoopError` if the loop has ended, or ends before
    /// `body` ran: the caller never waits on a loop that will not run again. Cancelling the calling
    /// task makes this throw `CancellationError` at once, without waiting for the loop: `body` does
    /// not run if it had not started, and a `body` already running finishes with its result
    /// dropped. A task already cancelled throws at once and queues nothing.
    public func submit<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        let reply = CancellableContinuation<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard reply.wait(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                // If the block is refused, or released unrun when the loop ends, the ticket's
                // deinit resumes the caller with the error.
                let ticket = SubmitTicket(reply)
                perform { ticket.run(body) }
            }
        } onCancel: {
            reply.cancel()
        }
    }

    /// Runs `job` on the calling thread after the loop has ended, serially with the loop's other
    /// late jobs (see the top of this file).
    func runAfterEnd(_ job: UnownedJob) {
        let drains = afterlife.withLock { $0.enqueue(job, by: Platform.currentThread) }
        guard drains else { return }
        while let next = afterlife.withLock({ $0.next() }) {
            next.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        }
    }

    /// At teardown: runs the jobs among `orphans` (blocks that never ran) on this, the loop's last
    /// moment on its thread, and releases the closures unrun.
    func runOrphanedJobs(_ orphans: BlockBuffer) {
        let blocks = orphans.takeAll()
        for slot in blocks.indices {
            let body = blocks[slot].takeBody()
            (blocks.baseAddress! + slot).deinitialize(count: 1)
            if case .job(let job) = consume body { runAfterEnd(job) }
        }
    }
}

/// Jobs enqueued on a loop that has ended, and the thread running them, if one is.
struct AfterlifeQueue {
    private var jobs: [UnownedJob] = []
    private var head = 0
    private var drainer: Platform.Thread?

    /// Queues `job`; returns true if `thread` is to run the queue (no other thread is).
    mutating func enqueue(_ job: UnownedJob, by thread: Platform.Thread) -> Bool {
        jobs.append(job)
        guard drainer == nil else { return false }
        drainer = thread
        return true
    }

    /// The next job for the draining thread, or nil (and no drainer any more) when none is left.
    mutating func next() -> UnownedJob? {
        guard head < jobs.count else {
            jobs.removeAll()
            head = 0
            drainer = nil
            return nil
        }
        defer { head += 1 }
        return jobs[head]
    }

    /// Whether the calling thread is the one running the queue.
    var isDrainedByCurrentThread: Bool {
        drainer.map(Platform.isCurrentThread) ?? false
    }
}

/// What the posted block of one `submit` holds: released without having run (the loop ended), it
/// resumes the caller with `LoopError.loopEnded`.
private final class SubmitTicket<T: Sendable>: Sendable {
    private let reply: CancellableContinuation<T>

    init(_ reply: CancellableContinuation<T>) { self.reply = reply }

    /// On the loop's thread: runs `body` unless the caller was cancelled meanwhile.
    func run(_ body: () throws -> T) {
        guard reply.isWaiting else { return }
        reply.resume(with: Result { try body() })
    }

    deinit {
        reply.resume(with: .failure(LoopError.loopEnded))
    }
}
