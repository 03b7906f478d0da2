import Glibc
import Synchronization

// Cross-thread traffic: blocks, stop and wake-up. Posting and waking go through the loop's
// `Inbox` (see `Core/Inbox.swift`); this file is the public face and the running of blocks.

extension Loop {
    /// Queues `block` to run on the loop's thread the next time the loop runs in one of `modes`
    /// (`.common`: any mode of the common set), and wakes the loop.
    ///
    /// Any thread. Blocks from one thread run in the order they were posted; blocks for modes that
    /// are not running wait, they are not dropped. Many posts between two iterations cost one
    /// wake-up. Returns false if the loop has ended (see ``hasEnded``): the block is then released
    /// without running. A block accepted just before the loop ended runs in the loop's last pass
    /// if it may run in `.default` (a `LoopThread`'s loop), else it is released unrun.
    @discardableResult
    public func perform(inModes modes: [Mode] = [.common], _ block: consuming @escaping @Sendable () -> Void)
        -> Bool
    {
        precondition(
            !modes.isEmpty, "RunLoopKit: perform(inModes:) needs at least one mode, or the block could never run")
        let named = modes.count == 1 && modes[0] == .common ? nil : modes
        return post(LoopBlock(.closure(consume block)), modes: named)
    }

    /// Queues `block` to run on the loop's thread in its common modes, and wakes the loop: the same
    /// as `perform(inModes: [.common], block)`, without building a mode array per call.
    ///
    /// Any thread. Returns false if the loop has ended: the block is then released without running.
    @discardableResult
    public func perform(_ block: consuming @escaping @Sendable () -> Void) -> Bool {
        post(LoopBlock(.closure(consume block)), modes: nil)
    }

    /// Queues `block` for `modes` (nil: the common modes) and wakes the loop once; false,
    /// dropping the block, if the loop has ended. Any thread.
    func post(_ block: consuming LoopBlock, modes: [Mode]?) -> Bool {
        if stampsPostedWork { block.stamp(TickClock.now) }
        // The loop's own thread checks its inbox before sleeping; only other threads must wake it.
        return inbox.post(block, modes: modes, fromOtherThread: { !isCurrentThread })
    }

    /// Ends the loop's current or next sleep without handling anything.
    ///
    /// Any thread. Coalesced: many calls before the loop wakes cost one write to its eventfd.
    public func wakeUp() {
        inbox.wake(endsNextSleep: true)
    }

    /// Makes the innermost running `run` return `.stopped` once the current callout returns.
    ///
    /// Any thread. Called while the loop is not running it does nothing (it is not remembered).
    /// Stopping ``main`` is allowed but discouraged.
    public func stop() {
        guard let frame = state.withLock({ $0.runStack.last }) else { return }
        frame.stopped.store(true, ordering: .releasing)
        wakeUpIfForeign()
    }

    /// Stops every run on the stack, outermost included. Any thread.
    func stopAllRuns() {
        let frames = state.withLock { $0.runStack }
        for frame in frames { frame.stopped.store(true, ordering: .releasing) }
        wakeUpIfForeign()
    }

    /// Wakes the loop, from another thread, for a change it re-reads before sleeping (a stop, a
    /// signal, an item added or removed, an instrument): a sleep in progress ends, an awake loop
    /// sees the change before it sleeps. Inlined: every item added or removed, and every signal,
    /// checks the thread.
    @inline(__always)
    func wakeUpIfForeign() {
        // On the loop's thread the loop sees the change at its next look, unless another loop
        // drives it: that one waits on the backend's descriptor, which the write makes readable.
        guard !isCurrentThread || backend?.isEmbedded == true else { return }
        inbox.wake(endsNextSleep: false)
    }

    func sourceWasSignalled(port: Bool) {
        if port {
            portSignalled.store(true, ordering: .releasing)
        } else {
            sourceSignalled.store(true, ordering: .releasing)
        }
        wakeUpIfForeign()
    }

    // MARK: Loop thread

    /// Moves posted blocks to the pending ones. `consumedWakeUp`: the backend has read the
    /// eventfd, so the next post must write it again.
    func collectPosts(consumedWakeUp: Bool = false) {
        // Nothing posted (most passes of a busy loop): no lock, and no reference count on the
        // pending buffer. A consumed wake-up must reach the inbox's state machine regardless.
        guard consumedWakeUp || inbox.mayHavePosts else { return }
        inbox.takePosts(into: onThread.pendingBlocks, consumedWakeUp: consumedWakeUp)
    }

    /// Runs the pending blocks that may run in `mode`, in posting order; the others keep waiting.
    /// Blocks posted meanwhile wait for the next pass. Returns whether any ran.
    @discardableResult
    func runBlocks(in mode: Mode) -> Bool {
        collectPosts()
        guard !onThread.pendingBlocks.isEmpty else { return false }
        let modeIsCommon = withView(of: mode) { $0.isCommon }
        // Set aside before running: a nested run inside a block must see only what is still
        // pending, and must not reach the buffer being drained.
        // An empty buffer to run from: the one kept for that, or (in a nested run) a new one.
        let runnable = onThread.runnableSpare.take() ?? BlockBuffer(owner: link)
        if onThread.pendingBlocks.allSatisfy({ LoopBlock.mayRun(withModes: $0, in: mode, modeIsCommon: modeIsCommon) })
        {
            // The usual case: everything pending may run.
            runnable.exchange(with: onThread.pendingBlocks)
        } else {
            onThread.pendingBlocks.move(
                where: { LoopBlock.mayRun(withModes: $0, in: mode, modeIsCommon: modeIsCommon) }, to: runnable)
            if runnable.isEmpty {
                keepRunnableSpare(runnable)
                return false
            }
        }
        // Each block is moved out of the buffer, its body handed to the callout and released after
        // it: the closure's context is released once and never retained on the way (the posting
        // thread holds references to the same objects, so every extra count bounces a cache line).
        let blocks = runnable.takeAll()
        // The clock, read once per pass and only if a block is stamped: any time after the posts
        // recovers their 48-bit stamps.
        var passTime: Ticks = 0
        for slot in blocks.indices {
            // Moved out in place: a copy of the block would retain the closure's context.
            let body = blocks[slot].takeBody()
            var postedAt: Ticks = 0
            if blocks[slot].isStamped {
                if passTime == 0 { passTime = TickClock.now }
                postedAt = blocks[slot].postedAt(now: passTime)
            }
            // Not destroyed: what is left in the slot (`.taken` and the stamp) holds no reference.
            // `deinitialize(count:)` went through the type's value witness (a generic array
            // destroy, 7 % of a typical-closure post run in `perf`), and even an inline destroy
            // is a call per block that finds nothing to release.
            switch consume body {
            case .closure(let body):
                if instruments == nil { body() } else { callOut(.block, postedAt: postedAt, body) }
            case .job(let job):
                callOut(.job, postedAt: postedAt) {
                    job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
                }
            case .scheduled(let handle):
                if instruments == nil {
                    _ = handle.runIfPending()
                } else {
                    callOut(.block) { _ = handle.runIfPending() }
                }
            case .modesOfNext, .taken:
                // The modes of the next block, which this pass may run (released here); nothing
                // left in a taken one.
                break
            }
        }
        keepRunnableSpare(runnable)
        return true
    }

    /// Keeps a drained buffer to run the next batch from, unless one is kept already or a burst
    /// grew it beyond what the loop keeps.
    private func keepRunnableSpare(_ buffer: consuming BlockBuffer) {
        if onThread.runnableSpare == nil && buffer.capacity <= BlockBuffer.retainedCapacity {
            onThread.runnableSpare = buffer
        }
    }

    /// Whether a block already collected may run in `mode` (call `collectPosts` first to count the
    /// ones other threads posted since).
    func hasPendingBlocks(for mode: Mode) -> Bool {
        guard !onThread.pendingBlocks.isEmpty else { return false }
        let modeIsCommon = withView(of: mode) { $0.isCommon }
        return onThread.pendingBlocks.contains { LoopBlock.mayRun(withModes: $0, in: mode, modeIsCommon: modeIsCommon) }
    }
}
