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
    /// Read only by the thread that moved `status` out of `pending` (the loop to run it, or the
    /// canceller to release it): no two threads touch it.
    @exclusivity(unchecked) private var block: (@Sendable () -> Void)?
    /// The modes the block may run in; nil for the common modes.
    let modes: [Loop.Mode]?
    /// When it may run (`fireTicks`) and when it must (`fireTicks` + tolerance), in ticks.
    let fireTicks: Ticks
    let latestTicks: Ticks
    /// Where it stands in its loop's queue of blocks not yet due; guarded by that queue's lock,
    /// which also makes the runtime's exclusivity checks redundant.
    @exclusivity(unchecked) var queueState = QueueState.notQueued

    enum QueueState {
        case notQueued
        /// In the queue, waiting for its time.
        case queued
    }
    /// Where its entry is in its loop's queue heap (-1: not there); guarded by the queue's lock.
    @exclusivity(unchecked) var heapIndex = -1
    /// The loop, held weakly through its link: a weak reference of the handle's own would form a
    /// side table per schedule (callgrind, `runloop-bench --filter 14`: about 90 instructions and
    /// an allocation of each `schedule` and `cancel`).
    private let link: LoopLink?

    init(loop: Loop?, modes: [Loop.Mode]?, fireTicks: Ticks, latestTicks: Ticks, block: (@Sendable () -> Void)?) {
        self.link = loop?.link
        self.modes = modes
        self.fireTicks = fireTicks
        self.latestTicks = latestTicks
        self.block = block
        status = Atomic(block == nil ? Status.cancelled.rawValue : Status.pending.rawValue)
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
        // Released after the queue's lock: the block's captures may schedule or cancel as they go.
        let released = block.take()
        link?.boundLoop.use { $0.scheduledWasCancelled(self) }
        withExtendedLifetime(released) {}
    }

    /// Whether `cancel()` stopped the block from running (also true for a handle that a loop which
    /// had ended returned from `schedule`).
    ///
    /// Any thread.
    public var isCancelled: Bool { status.load(ordering: .acquiring) == Status.cancelled.rawValue }

    /// Loop thread: runs the block unless it was cancelled first. Returns whether it ran.
    func runIfPending() -> Bool {
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
