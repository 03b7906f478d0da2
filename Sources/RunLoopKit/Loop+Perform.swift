import Glibc
import Synchronization

// Cross-thread traffic: blocks, signals, stop and wake-up.
//
// Other threads never touch libevent. They append to `inbox` and, if no wake-up is pending yet,
// write the loop's eventfd once (after unlocking, so the woken loop does not sleep on the lock;
// the eventfd stays open until the Loop object itself goes, so a late write never hits a reused
// descriptor): however many posts land between two iterations, the loop is woken
// once. The loop clears `wakePending` only after it has read the eventfd, then takes the inbox, so a
// post that lands after the take sees the flag clear and writes again: no post is ever slept on.

extension Loop {
    /// Work queued by `perform` or by the executor, with the modes it may run in.
    struct Block {
        enum Body {
            case closure(@Sendable () -> Void)
            /// A Swift concurrency job: queued as is, no closure allocated per job.
            case job(UnownedJob)
            /// A scheduled block whose time has come (it runs unless cancelled first).
            case scheduled(LoopScheduled)
            case taken
        }

        /// The modes it may run in; nil for the common modes, the usual case, which then costs no
        /// array and no reference count shared by every posting thread.
        let modes: [Mode]?
        /// `.taken` once moved out to run.
        var body: Body
        /// When it was posted, while an instrument measures queue delay; 0 otherwise.
        var postedAt: Ticks = 0

        init(modes: [Mode]?, body: consuming Body) {
            self.modes = modes?.count == 1 && modes?[0] == .common ? nil : modes
            self.body = body
        }

        /// Moves the body out, leaving `.taken`: no retain or release of the closure's context.
        mutating func takeBody() -> Body {
            var body = Body.taken
            swap(&body, &self.body)
            return body
        }
    }

    struct Inbox {
        var blocks = BlockBuffer()
        /// True from the eventfd write until the loop has read it.
        var wakePending = false
        /// The pending wake-up is (also) a public `wakeUp()`: the loop must not read it away before
        /// sleeping (see `takeInboxBeforeSleeping`), its next sleep must end at once.
        var wakeUpRequested = false
        /// Set at teardown: nothing is queued and the eventfd is not written any more.
        var closed = false
        /// The loop is polling for work before sleeping (see `Loop+Spin.swift`): a wake-up is a
        /// store to `spinKick`, not an eventfd write.
        var spinning = false
    }

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
        return post(Block(modes: modes, body: .closure(consume block)))
    }

    /// Queues `block` to run on the loop's thread in its common modes, and wakes the loop: the same
    /// as `perform(inModes: [.common], block)`, without building a mode array per call.
    ///
    /// Any thread. Returns false if the loop has ended: the block is then released without running.
    @discardableResult
    public func perform(_ block: consuming @escaping @Sendable () -> Void) -> Bool {
        post(Block(modes: nil, body: .closure(consume block)))
    }

    /// Appends to the inbox and wakes the loop once (see the top of this file); returns false,
    /// dropping the block, if the loop has ended. Any thread.
    func post(_ block: consuming Block) -> Bool {
        if stampsPostedWork { block.postedAt = TickClock.now }
        // Moved into the inbox, not copied: a copy would cost a retain and a release of the
        // closure's context, a cache line the loop thread is releasing at the same time.
        var moving: Block? = consume block
        let (accepted, mustWake) = inbox.withLock { inbox in
            guard !inbox.closed else { return (false, false) }
            inbox.blocks.append(moving.take()!)
            // The loop's own thread checks its inbox before sleeping; only other threads must wake
            // it. Which thread this is matters only when no wake-up is pending yet: while posts
            // stream in, one is, and the thread-specific look-up is skipped.
            return (true, !inbox.wakePending && !isCurrentThread && claimWakeUp(&inbox, endsNextSleep: false))
        }
        if mustWake { writeWakeDescriptor() }
        return accepted
    }

    /// Ends the loop's current or next sleep without handling anything.
    ///
    /// Any thread. Coalesced: many calls before the loop wakes cost one write to its eventfd.
    public func wakeUp() {
        if inbox.withLock({ claimWakeUp(&$0, endsNextSleep: true) }) { writeWakeDescriptor() }
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

    /// Under the inbox lock: whether this caller is the one to write the eventfd. A spinning loop
    /// is told through `spinKick` instead, and no wake-up is left pending.
    /// `endsNextSleep`: a public `wakeUp()`, which must end the loop's next sleep even if the loop
    /// is awake now. Other wake-ups announce what the loop reads before it sleeps anyway (posts,
    /// a stop, a signal, a changed item or instrument): they must end a sleep in progress, and the
    /// loop may read them away with the posts before its next one.
    private func claimWakeUp(_ inbox: inout Inbox, endsNextSleep: Bool) -> Bool {
        guard !inbox.closed else { return false }
        if inbox.spinning {
            spinKick.store(true, ordering: .releasing)
            return false
        }
        if endsNextSleep { inbox.wakeUpRequested = true }
        guard !inbox.wakePending else { return false }
        inbox.wakePending = true
        return true
    }

    private func writeWakeDescriptor() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)
    }

    /// Wakes the loop, from another thread, for a change it re-reads before sleeping (a stop, a
    /// signal, an item added or removed, an instrument): a sleep in progress ends, an awake loop
    /// sees the change before it sleeps.
    func wakeUpIfForeign() {
        guard !isCurrentThread else { return }
        if inbox.withLock({ claimWakeUp(&$0, endsNextSleep: false) }) { writeWakeDescriptor() }
    }

    func sourceWasSignalled(port: Bool) {
        if port {
            portSignalled.store(true, ordering: .releasing)
        } else {
            sourceSignalled.store(true, ordering: .releasing)
        }
        wakeUpIfForeign()
    }

    /// Moves posted blocks into `pendingBlocks`. `consumedWakeUp`: the backend has read the eventfd,
    /// so the next post must write it again. Loop thread only.
    func takeInbox(consumedWakeUp: Bool) {
        // The inbox's buffer is swapped with the empty spare: the lock is held for a pointer swap,
        // and a pass with nothing posted touches no reference count.
        let took = inbox.withLock { inbox in
            if consumedWakeUp {
                inbox.wakePending = false
                inbox.wakeUpRequested = false
            }
            guard !inbox.blocks.isEmpty else { return false }
            swap(&inbox.blocks, &spareBlocks)
            return true
        }
        if took { queueTakenBlocks() }
    }

    /// Appends the blocks just swapped into `spareBlocks` to `pendingBlocks`, leaving an empty
    /// spare again (the emptied pending buffer, or the taken one once moved from).
    private func queueTakenBlocks() {
        if pendingBlocks.isEmpty {
            swap(&pendingBlocks, &spareBlocks)
        } else {
            pendingBlocks.append(movingFrom: spareBlocks)
        }
        // A burst grew it beyond what the loop keeps: its memory goes back.
        if spareBlocks.capacity > BlockBuffer.retainedCapacity { spareBlocks = BlockBuffer() }
    }

    /// Before sleeping: takes the inbox, first reading the eventfd if a wake-up was written for it
    /// only to announce posts. The loop takes posts without polling the kernel, so the wake-up of
    /// posts it has already taken would otherwise end its next sleep at once. Read before the take,
    /// never after: a post landing in between then either finds the flag still set (and is taken
    /// here) or writes again. A `wakeUp()` is left written: it must end the next sleep.
    func takeInboxBeforeSleeping() {
        // One lock in the usual case (no wake-up pending): look at the flag and take the posts.
        var took = false
        let postsOnly = inbox.withLock { inbox in
            if !inbox.wakePending, !inbox.blocks.isEmpty {
                swap(&inbox.blocks, &spareBlocks)
                took = true
            }
            return inbox.wakePending && !inbox.wakeUpRequested
        }
        if took { queueTakenBlocks() }
        guard postsOnly else { return }
        _ = LibeventBackend.drainEventDescriptor(wakeDescriptor)
        took = false
        let rewrite = inbox.withLock { inbox in
            if !inbox.blocks.isEmpty {
                swap(&inbox.blocks, &spareBlocks)
                took = true
            }
            // A wakeUp() that came while the eventfd was read found the flag set and did not
            // write: the loop writes for it, so that its next sleep still ends at once.
            guard !inbox.wakeUpRequested else { return true }
            inbox.wakePending = false
            return false
        }
        if took { queueTakenBlocks() }
        if rewrite { writeWakeDescriptor() }
    }

    /// Runs the pending blocks that may run in `mode`, in posting order; the others keep waiting.
    /// Blocks posted meanwhile wait for the next pass. Loop thread only. Returns whether any ran.
    @discardableResult
    func runBlocks(in mode: Mode) -> Bool {
        takeInbox(consumedWakeUp: false)
        guard !pendingBlocks.isEmpty else { return false }
        let modeIsCommon = view(of: mode).isCommon
        // Set aside before running: a nested run inside a block must see only what is still
        // pending, and must not reach the buffer being drained.
        // An empty buffer to run from: the one kept for that, or (in a nested run) a new one.
        var runnable = runnableSpare.take() ?? BlockBuffer()
        if pendingBlocks.allSatisfy({ Loop.block($0, mayRunIn: mode, modeIsCommon: modeIsCommon) }) {
            // The usual case: everything pending may run.
            swap(&runnable, &pendingBlocks)
        } else {
            pendingBlocks.move(where: { Loop.block($0, mayRunIn: mode, modeIsCommon: modeIsCommon) }, to: runnable)
            if runnable.isEmpty {
                keepRunnableSpare(runnable)
                return false
            }
        }
        // Each block is moved out of the buffer, its body handed to the callout and released after
        // it: the closure's context is released once and never retained on the way (the posting
        // thread holds references to the same objects, so every extra count bounces a cache line).
        let blocks = runnable.takeAll()
        for slot in blocks.indices {
            // Moved out in place: a copy of the block would retain the closure's context.
            let body = blocks[slot].takeBody()
            let postedAt = blocks[slot].postedAt
            (blocks.baseAddress! + slot).deinitialize(count: 1)
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
            case .taken:
                break
            }
        }
        keepRunnableSpare(runnable)
        return true
    }

    /// Keeps a drained buffer to run the next batch from, unless one is kept already or a burst
    /// grew it beyond what the loop keeps.
    private func keepRunnableSpare(_ buffer: consuming BlockBuffer) {
        if runnableSpare == nil && buffer.capacity <= BlockBuffer.retainedCapacity { runnableSpare = buffer }
    }

    /// Whether a block that may run in `mode` is pending (including ones posted from this thread).
    func hasBlocks(for mode: Mode) -> Bool {
        takeInbox(consumedWakeUp: false)
        return hasPendingBlocks(for: mode)
    }

    /// Whether a block already moved out of the inbox may run in `mode`.
    func hasPendingBlocks(for mode: Mode) -> Bool {
        guard !pendingBlocks.isEmpty else { return false }
        let modeIsCommon = view(of: mode).isCommon
        return pendingBlocks.contains { Loop.block($0, mayRunIn: mode, modeIsCommon: modeIsCommon) }
    }

    /// Whether `block` may run in `mode`; `modeIsCommon`: `mode` is in the common set (looked up
    /// once per pass, not per block).
    @inline(__always)
    static func block(_ block: borrowing Block, mayRunIn mode: Mode, modeIsCommon: Bool) -> Bool {
        guard let modes = block.modes else { return modeIsCommon }
        for candidate in modes
        where candidate == mode || (modeIsCommon && candidate == .common) {
            return true
        }
        return false
    }
}
