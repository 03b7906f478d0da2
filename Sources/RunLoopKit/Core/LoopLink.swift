/// A loop as the timers, observers and custom sources bound to it hold it: one object per loop,
/// shared by them all, holding the loop weakly. An item holds the link strongly, so it never keeps
/// its loop alive, yet binding one costs a reference count on the link instead of forming and
/// destroying a weak reference to the loop (which goes through the loop's side table), and an item
/// used on its loop's own thread reaches the loop with no reference counting at all. Measured with
/// `runloop-bench --filter churn`: the weak reference per timer was 13 % of the time to create,
/// add and invalidate one.
final class LoopLink: @unchecked Sendable {
    /// Written once, by the loop's initializer, before the loop is shared; read from any thread.
    private(set) weak var loop: Loop?
    init() {}

    /// Called once, at the end of the loop's initializer.
    func attach(_ loop: Loop) { self.loop = loop }

    /// Whether the calling thread is the loop's, for debug-build checks of loop-thread-only state
    /// (a weak load); false once the loop is gone.
    var isLoopThread: Bool { loop?.isCurrentThread ?? false }

    /// The loop, for a call made after the item's lock is let go: unretained if it is the calling
    /// thread's loop (the thread keeps it alive until after its teardown), retained otherwise.
    var boundLoop: BoundLoop {
        if let raw = Platform.currentLoopPointer {
            let current = Unmanaged<Loop>.fromOpaque(raw)
            // Compared by link, not by address: a loop that died may have left its address to
            // another, but its link lives on in the items that hold it.
            if current._withUnsafeGuaranteedRef({ $0.link === self }) { return BoundLoop(current: current) }
        }
        return BoundLoop(other: loop)
    }
}

/// An item's loop as read under the item's lock (see `LoopLink.boundLoop`).
struct BoundLoop {
    private var current: Unmanaged<Loop>?
    private var other: Loop?

    static let none = BoundLoop(other: nil)

    fileprivate init(current: Unmanaged<Loop>) { self.current = current }
    fileprivate init(other: Loop?) { self.other = other }

    /// Calls `body` with the loop, if it is still alive.
    @inline(__always)
    func use(_ body: (Loop) -> Void) {
        use { loop, _ in body(loop) }
    }

    /// Calls `body` with the loop, if it is still alive, and whether it is the calling thread's
    /// (then the caller need not ask again, a thread-specific look-up).
    @inline(__always)
    func use(_ body: (Loop, _ isCallingThreads: Bool) -> Void) {
        if let current {
            current._withUnsafeGuaranteedRef { body($0, true) }
        } else if let other {
            body(other, false)
        }
    }
}
