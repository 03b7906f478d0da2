import Synchronization

// Scheduled blocks: `schedule(after:)`, a one-shot block for later that can be cancelled, for the
// price of one object per call.
//
// One queue per loop, not per mode: a heap of handles keyed by their latest allowed time (the
// fire time plus the tolerance), behind a lock any thread may take to schedule or cancel. The
// loop reads two atomics mirroring the heap's top on each pass and takes the lock only when a
// block is due. Due blocks join the pending blocks and run at step 2.6 in their modes, like those
// of `perform` (a block for a mode that is not running waits for it). Each handle knows where its
// entry is (a tracked entry, as a timer's), so a cancel takes it out of the heap at once: the heap
// holds only blocks that may still run, and a cancelled handle goes with its caller's last
// reference (measured against leaving cancelled handles in the heap: see `scheduledWasCancelled`).

struct ScheduledQueue {
    var heap = TickHeap<LoopScheduled>()
    var sequence: UInt64 = 0
    /// Queued, for the common modes and for named modes.
    var commonCount = 0
    var namedCount = 0
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
            handle.place.state = .queued
            queue.heap.push(latest, queue.sequence, handle, tracked: .first)
            if named == nil { queue.commonCount += 1 } else { queue.namedCount += 1 }
            let isFirst = queue.heap.isTop(handle)
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
    private func publishScheduledTop(_ queue: borrowing ScheduledQueue) {
        scheduledWake.store(queue.heap.topKey ?? .max, ordering: .releasing)
        scheduledDue.store(queue.heap.readTopElement { $0.fireTicks } ?? .max, ordering: .releasing)
        scheduledPending.store(queue.commonCount + queue.namedCount, ordering: .releasing)
    }

    /// A handle of this loop was cancelled: its entry leaves the heap if it is still there. Any
    /// thread; the caller holds the handle, so the heap's release of it is never the last.
    ///
    /// Removed at once rather than left for the loop to skip: left there, cancelled handles would
    /// stay alive until a compaction (once more than half the heap was cancelled) freed them by
    /// the dozen, emptying malloc's per-thread cache, and a heap of cancelled and live blocks would
    /// make every pop deeper (docs/performance-notes.md#instructions-per-scheduled-block).
    func scheduledWasCancelled(_ handle: LoopScheduled) {
        scheduledQueue.withLock { queue in
            guard handle.place.state == .queued else { return }
            handle.place.state = .notQueued
            if handle.modes == nil { queue.commonCount -= 1 } else { queue.namedCount -= 1 }
            if queue.heap.isTrackedEntry(at: handle.place.heapIndex, of: handle) {
                queue.heap.remove(at: handle.place.heapIndex)
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
    ///
    /// The check for none is inlined into the pass: as a call, it cost a busy pass a call and a
    /// retain and release of the pass's ready descriptors around it
    /// (docs/performance-notes.md#instructions-per-pass).
    @inline(__always)
    func takeDueScheduledBlocks() {
        guard scheduledWake.load(ordering: .acquiring) != .max else { return }
        takeDueScheduledBlocksNow()
    }

    @inline(never)
    private func takeDueScheduledBlocksNow() {
        let now = TickClock.now
        guard hasDueScheduledBlock(now: now) else { return }
        scheduledQueue.withLock { queue in
            while let key = queue.heap.topKey, key <= now || queue.heap.readTopElement({ $0.fireTicks <= now })! {
                guard let handle = queue.heap.pop()?.element else { break }
                // A cancel takes its entry out of the heap, so every entry here is still queued.
                assert(
                    handle.place.state == .queued,
                    "RunLoopKit: a scheduled block left in the heap after leaving the queue")
                if handle.modes == nil { queue.commonCount -= 1 } else { queue.namedCount -= 1 }
                // Cancelled after this (before it runs): its run finds it cancelled.
                onThread.pendingBlocks.append(LoopBlock(.scheduled(handle)))
                handle.place.state = .notQueued
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
                guard entry.element.place.state == .queued, let modes = entry.element.modes else { return false }
                return modes.contains(mode) || (isCommon && modes.contains(.common))
            }
        }
    }

    /// The earliest fire time of the scheduled blocks that may run in one of `modes` (`isCommon`:
    /// they are common modes, where blocks for `.common` run); nil when none. Any thread; a walk
    /// over the queue, for `nextTimerFireDate(forMode:)`, which is not on the loop's path.
    func nextScheduledFireTicks(for modes: Set<Mode>, isCommon: Bool) -> Ticks? {
        guard scheduledPending.load(ordering: .acquiring) > 0 else { return nil }
        return scheduledQueue.withLock { queue in
            var earliest: Ticks?
            for entry in queue.heap.entries where entry.element.place.state == .queued {
                let handle = entry.element
                let runsHere =
                    if let named = handle.modes {
                        named.contains(where: modes.contains) || (isCommon && named.contains(.common))
                    } else {
                        isCommon
                    }
                if runsHere, earliest.map({ handle.fireTicks < $0 }) ?? true { earliest = handle.fireTicks }
            }
            return earliest
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
                publishScheduledTop(queue)
            }
            for entry in queue.heap.entries {
                entry.element.place = LoopScheduled.QueuePlace()
            }
            return queue.heap
        }
        for entry in heap.entries { entry.element.cancelAtTeardown() }
    }
}

extension LoopScheduled: TickHeapElement {
    /// Under its loop's queue lock, like all of `place`.
    @inline(__always)
    func trackedEntryMoved(to index: Int, as track: TickHeapTrack) { place.heapIndex = index }
}
