import Synchronization

/// A block scheduled with `Loop.schedule(after:inModes:tolerance:_:)`: a handle to cancel it.
///
/// One object per schedule, and the only allocation `schedule` makes (besides the block's own
/// context): cheaper than a `LoopTimer` per call.
///
/// Thread rules: `Sendable`; `cancel()` and `isCancelled` work from any thread.
public final class LoopScheduled: @unchecked Sendable {
    /// `pending` until the loop claims the block to run it (`ran`) or `cancel()` wins (`cancelled`):
    /// one compare-and-swap decides, so the block runs at most once and never after a successful
    /// cancel.
    private enum Status: UInt8 {
        case pending = 0
        case ran = 1
        case cancelled = 2
    }

    private let status: Atomic<UInt8>
    /// Touched only by the thread that moved `status` out of `pending` (the loop to run it, or the
    /// canceller or the teardown to release it), so no two threads touch it: reached through
    /// `block`, which checks that in debug builds.
    @exclusivity(unchecked) private var uncheckedBlock: (@Sendable () -> Void)?
    /// The modes the block may run in; nil for the common modes.
    let modes: [Loop.Mode]?
    /// When it may run (`fireTicks`) and when it must (`fireTicks` + tolerance), in ticks.
    let fireTicks: Ticks
    let latestTicks: Ticks
    /// Guarded by its loop's queue lock, which makes the runtime's exclusivity checks redundant:
    /// reached through `place`, which checks the lock in debug builds.
    @exclusivity(unchecked) private var uncheckedPlace = QueuePlace()

    /// Where a handle stands in its loop's queue of blocks not yet due.
    struct QueuePlace {
        var state = QueueState.notQueued
        /// Where its entry is in the queue's heap (-1: not there).
        var heapIndex = -1
    }

    enum QueueState {
        case notQueued
        /// In the queue, waiting for its time.
        case queued
    }
    /// The loop, held weakly through its link: a weak reference of the handle's own would form a
    /// side table per schedule, an allocation of each `schedule` and `cancel`
    /// (docs/performance-notes.md#instructions-per-scheduled-block).
    private let link: LoopLink?

    init(loop: Loop?, modes: [Loop.Mode]?, fireTicks: Ticks, latestTicks: Ticks, block: (@Sendable () -> Void)?) {
        self.link = loop?.link
        self.modes = modes
        self.fireTicks = fireTicks
        self.latestTicks = latestTicks
        self.uncheckedBlock = block
        status = Atomic(block == nil ? Status.cancelled.rawValue : Status.pending.rawValue)
    }

    /// The block, for the thread that moved `status` out of `pending` (checked in debug builds).
    private var block: (@Sendable () -> Void)? {
        _read {
            assertClaimed()
            yield uncheckedBlock
        }
        _modify {
            assertClaimed()
            yield &uncheckedBlock
        }
    }

    @inline(__always)
    private func assertClaimed() {
        assert(
            status.load(ordering: .relaxed) != Status.pending.rawValue,
            "RunLoopKit: LoopScheduled's block touched before a run or a cancel claimed it")
    }

    /// Its place in its loop's queue. Under that queue's lock (checked in debug builds).
    var place: QueuePlace {
        _read {
            assertQueueLocked()
            yield uncheckedPlace
        }
        _modify {
            assertQueueLocked()
            yield &uncheckedPlace
        }
    }

    @inline(__always)
    private func assertQueueLocked() {
        assert(
            link?.loop?.scheduledQueue.isLocked ?? true,
            "RunLoopKit: LoopScheduled's queue place touched without its loop's queue lock")
    }

    /// Cancels the block: once `cancel()` returns, a block that had not started never runs, and
    /// `isCancelled` is true. A block that already ran, or is running on the loop's thread right
    /// now, is not affected: `isCancelled` then stays false. Called on the loop's thread (from
    /// another callout) there is no "running right now": false means it ran.
    ///
    /// Any thread; idempotent. The block is released at once.
    public func cancel() {
        guard
            status.compareExchange(
                expected: Status.pending.rawValue, desired: Status.cancelled.rawValue, ordering: .acquiringAndReleasing
            ).exchanged
        else { return }
        // Released outside the queue's lock: the block's captures may schedule or cancel as they go.
        // `_ =`, not `withExtendedLifetime`: that boxes the closure in a heap thunk
        // (docs/performance-notes.md#instructions-per-scheduled-block).
        let released = block.take()
        link?.boundLoop.use { $0.scheduledWasCancelled(self) }
        _ = released
    }

    /// Whether `cancel()` stopped the block from running (also true for a handle that a loop which
    /// had ended returned from `schedule`).
    ///
    /// Any thread.
    public var isCancelled: Bool { status.load(ordering: .acquiring) == Status.cancelled.rawValue }

    /// Loop thread (checked in debug builds): runs the block unless it was cancelled first.
    /// Returns whether it ran.
    func runIfPending() -> Bool {
        assert(link?.isLoopThread ?? true, "RunLoopKit: LoopScheduled's block run off its loop's thread")
        guard
            status.compareExchange(
                expected: Status.pending.rawValue, desired: Status.ran.rawValue, ordering: .acquiringAndReleasing
            ).exchanged
        else { return false }
        block.take()?()
        return true
    }

    /// The loop ended before the block ran: it never will, and says so.
    func cancelAtTeardown() {
        guard
            status.compareExchange(
                expected: Status.pending.rawValue, desired: Status.cancelled.rawValue, ordering: .acquiringAndReleasing
            ).exchanged
        else { return }
        block = nil
    }
}
