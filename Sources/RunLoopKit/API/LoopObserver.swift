import Synchronization

/// A callback at chosen phases (activities) of a loop: CFRunLoopObserver's counterpart.
///
/// Observers of a mode are called in ascending `order`, ties in insertion order. An observer is not
/// re-entered while it runs (a nested run skips it). A non-repeating observer invalidates itself
/// after its first callout. Observers do not keep a mode alive. An observer belongs to one loop.
/// The handler runs on the loop's thread.
public final class LoopObserver: @unchecked Sendable {
    /// The phases this observer is called at.
    ///
    /// Any thread.
    public let activities: Loop.Activity
    /// Whether the observer stays valid after its first callout.
    ///
    /// Any thread.
    public let repeats: Bool
    /// Observers are called in ascending order; ties in the order they were added.
    ///
    /// Any thread.
    public let order: Int

    struct State: ItemState, @unchecked Sendable {  // the handler only ever runs on the loop thread
        var isValid = true
        var handler: ((LoopObserver, Loop.Activity) -> Void)?
        var link: LoopLink?
    }

    /// The observer's state behind a lock word in the object itself (see `ItemCore`): the
    /// critical sections are a few field accesses, taken on every pass that serves it. A pthread
    /// mutex per object costs a busy loop with six observers about 40 % of its passes
    /// (`runloop-bench --filter iteration`).
    @exclusivity(unchecked) var core: ItemCore<State>
    /// Beside `core`, not in it (see `ItemCore`); guarded by its loop's `state` lock.
    @exclusivity(unchecked) var membership = Membership()
    /// Its sort key's insertion sequence in each mode (ties of `order` go by it); guarded by the
    /// owning loop's `state` lock.
    @exclusivity(unchecked) var positions = ModePositions<UInt64>()
    /// Set while the handler runs; only touched on the loop's thread.
    @exclusivity(unchecked) private var isRunning = false

    /// Creates an observer of `activities`.
    ///
    /// Any thread. The observer does nothing until added to a loop.
    public init(
        activities: Loop.Activity, repeats: Bool = true, order: Int = 0,
        _ handler: sending @escaping (LoopObserver, Loop.Activity) -> Void
    ) {
        self.activities = activities
        self.repeats = repeats
        self.order = order
        self.core = ItemCore(State(handler: handler))
    }

    /// Whether the observer will still be called.
    ///
    /// Any thread.
    public var isValid: Bool { withState { $0.isValid } }

    /// Stops the observer for good, removes it from its loop and releases its handler.
    ///
    /// Any thread, including from inside its own handler.
    public func invalidate() {
        var handler: ((LoopObserver, Loop.Activity) -> Void)?
        retireItem { handler = $1.handler.take() }
        _ = handler  // let go of here, after the observer's and its loop's locks
    }

    // MARK: Loop machinery

    func bind(to loop: Loop) -> Bool {
        bindState(to: loop, kind: "LoopObserver") { $0.isValid }
    }

    /// Calls the handler for `activity` unless it is already running. Loop thread only.
    func callOut(_ activity: Loop.Activity) {
        guard !isRunning, let handler = withState({ $0.isValid ? $0.handler : nil }) else { return }
        isRunning = true
        handler(self, activity)
        isRunning = false
        if !repeats { invalidate() }
    }
}
