import Synchronization

// Scheduled blocks: `schedule(after:)`, a one-shot block for later that can be cancelled, for the
// price of one object per call.
//
// One queue per loop, not per mode: a heap of handles keyed by their latest allowed time (the
// fire time plus the tolerance), behind a lock any thread may take to schedule or cancel. The
// loop reads two atomics mirroring the heap's top on each pass and takes the lock only when a
// block is due. Due blocks join the pending blocks and run at step 2.6 in their modes, like those
// of `perform` (a block for a mode that is not running waits for it). Cancelled handles stay in
// the heap until they reach the top or the heap compacts (more than half of it cancelled).

struct ScheduledQueue {
    var heap = TickHeap<LoopScheduled>()
    var sequence: UInt64 = 0
    /// Queued and not cancelled, for the common modes and for named modes.
    var commonCount = 0
    var namedCount = 0
    /// Queued and cancelled: garbage until the heap compacts.
    var cancelledCount = 0
    /// Set when the loop ends: nothing is queued any more.
    var closed = false
}

extension Loop {
    /// Runs `block` once, on the loop's thread, in `modes` (`.common`: any mode of the common set),
    /// after `delay`; returns a handle to cancel it.
    ///
    /// Any thread. The block never runs early, and runs within `tolerance` of its time when the
    /// loop is free then and runs one of `modes`, as a timer does (the loop uses the tolerance to
    /// coalesce wake-ups); a block whose time came while the loop ran another mode runs when one of
    /// its modes runs. A pending block keeps its modes alive, like a timer. A negative delay or
    /// tolerance counts as zero. On a loop that has ended, the block is released at once and the
    /// handle returned is already cancelled.
    @discardableResult
    public func schedule(
        after delay: Duration, inModes modes: [Mode] = [.common], tolerance: Duration = .zero,
        _ block: @escaping @Sendable () -> Void
    ) -> LoopScheduled {
        precondition(
            !modes.isEmpty, "RunLoopKit: schedule(after:inModes:) needs at least one mode, or the block could never run"
        )
        let fire = TickClock.now.addingSaturating(delay.saturatingNanoseconds)
        let latest = fire.addingSaturating(tolerance.saturatingNanoseconds)
        let named: [Mode]? = modes.count == 1 && modes[0] == .common ? nil : modes
        let handle = LoopScheduled(loop: self, modes: named, fireTicks: fire, latestTicks: latest, block: block)
        let (accepted, isFirst) = scheduledQueue.withLock { queue in
            guard !queue.closed else { return (false, false) }
            queue.sequence &+= 1
            queue.heap.push(latest, queue.sequence, handle)
            handle.queueState = .queued
            if named == nil { queue.commonCount += 1 } else { queue.namedCount += 1 }
            let isFirst = queue.heap.top?.element === handle
            publishScheduledTop(queue)
            return (true, isFirst)
        }
        guard accepted else {
            handle.cancelAtTeardown()
            return handle
        }
        // A sleeping loop must re-arm for an earlier time; a later one changes nothing.
        if isFirst { wakeUpIfForeign() }
        return handle
    }

    /// Under the queue's lock: mirrors the heap's top and the pending count in atomics for the loop.
    private func publishScheduledTop(_ queue: ScheduledQueue) {
        let top = queue.heap.top
        scheduledWake.store(top?.key ?? .max, ordering: .releasing)
        scheduledDue.store(top?.element.fireTicks ?? .max, ordering: .releasing)
        scheduledPending.store(queue.commonCount + queue.namedCount, ordering: .releasing)
    }

    /// A handle of this loop was cancelled: counted as garbage if still queued. Any thread.
    func scheduledWasCancelled(_ handle: LoopScheduled) {
        scheduledQueue.withLock { queue in
            guard handle.queueState == .queued else { return }
            handle.queueState = .queuedCancelled
            if handle.modes == nil { queue.commonCount -= 1 } else { queue.namedCount -= 1 }
            queue.cancelledCount += 1
            if queue.cancelledCount > 64 && queue.cancelledCount * 2 > queue.heap.count {
                queue.heap.compact { entry in
                    guard entry.element.queueState == .queuedCancelled else { return true }
                    entry.element.queueState = .notQueued
                    return false
                }
                queue.cancelledCount = 0
            }
            publishScheduledTop(queue)
        }
    }

    /// The latest time the loop may sleep until for its scheduled blocks (nil: none).
    var scheduledWakeTime: Ticks? {
        let wake = scheduledWake.load(ordering: .acquiring)
        return wake == .max ? nil : wake
    }

    /// Whether a scheduled block may run now (`now`: the clock, read by the caller).
    func hasDueScheduledBlock(now: Ticks) -> Bool {
        scheduledDue.load(ordering: .acquiring) <= now || scheduledWake.load(ordering: .acquiring) <= now
    }

    /// Step 2.5: moves the scheduled blocks that are due to the pending blocks, where step 2.6 runs
    /// them in their modes. Loop thread only.
    func takeDueScheduledBlocks() {
        guard scheduledWake.load(ordering: .acquiring) != .max else { return }
        let now = TickClock.now
        guard hasDueScheduledBlock(now: now) else { return }
        scheduledQueue.withLock { queue in
            while let top = queue.heap.top, top.key <= now || top.element.fireTicks <= now {
                queue.heap.pop()
                let handle = top.element
                switch handle.queueState {
                case .queuedCancelled:
                    queue.cancelledCount -= 1
                case .queued:
                    if handle.modes == nil { queue.commonCount -= 1 } else { queue.namedCount -= 1 }
                    // Cancelled meanwhile (not yet counted): its run below finds it cancelled.
                    onThread.pendingBlocks.append(LoopBlock(modes: handle.modes, body: .scheduled(handle)))
                case .notQueued:
                    break
                }
                handle.queueState = .notQueued
            }
            publishScheduledTop(queue)
        }
    }

    /// Whether a scheduled block not yet due may run in `mode` (it keeps the mode alive).
    func hasScheduledBlocks(for mode: Mode, isCommon: Bool) -> Bool {
        guard scheduledPending.load(ordering: .acquiring) > 0 else { return false }
        return scheduledQueue.withLock { queue in
            if isCommon && queue.commonCount > 0 { return true }
            guard queue.namedCount > 0 else { return false }
            return queue.heap.entries.contains { entry in
                guard entry.element.queueState == .queued, let modes = entry.element.modes else { return false }
                return modes.contains(mode) || (isCommon && modes.contains(.common))
            }
        }
    }

    /// At teardown: no more scheduling; the blocks that never ran are released, their handles
    /// cancelled.
    func closeScheduledQueue() {
        let heap = scheduledQueue.withLock { queue in
            queue.closed = true
            defer {
                queue.heap = TickHeap()
                queue.commonCount = 0
                queue.namedCount = 0
                queue.cancelledCount = 0
                publishScheduledTop(queue)
            }
            return queue.heap
        }
        for entry in heap.entries { entry.element.cancelAtTeardown() }
    }
}

extension LoopScheduled: TickHeapElement {
    /// Scheduled blocks have no tracked entries.
    func trackedEntryMoved(to index: Int) {}
}
