// A loop as a Swift concurrency executor: actors whose `unownedExecutor` is a loop run on its
// thread, and tasks that prefer a loop run their non-isolated code there.

extension Loop: SerialExecutor, TaskExecutor {
    /// Queues a job to run on the loop's thread in its common modes, and wakes the loop like
    /// `perform` (jobs and blocks share one queue, in posting order).
    ///
    /// Any thread. No closure is allocated per job. Jobs queued to a loop whose thread has exited
    /// never run.
    public func enqueue(_ job: consuming ExecutorJob) {
        post(Block(modes: nil, body: .job(UnownedJob(job))))
    }

    /// Traps, with a plain message, unless called on the loop's thread; makes
    /// `assumeIsolated` work for code isolated to this loop.
    ///
    /// Any thread.
    public func checkIsolated() {
        precondition(
            isCurrentThread,
            "RunLoopKit: this code is isolated to a Loop's executor but is running on another thread than the loop's"
        )
    }

    /// Whether the calling thread is the loop's thread.
    ///
    /// Any thread.
    public func isIsolatingCurrentContext() -> Bool? {
        isCurrentThread
    }

    /// Runs `body` on the loop's thread (in its common modes) and returns its result or error.
    ///
    /// Any thread or task. Called on the loop's thread it still queues the work (the loop must be
    /// running for it to complete).
    public func submit<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            perform {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
