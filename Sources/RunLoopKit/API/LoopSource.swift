import Synchronization

/// A custom input source (CFRunLoop's version 0): `signal()` marks it, and a loop running a mode
/// that holds it calls `perform` on the loop's thread.
///
/// Signalled sources are performed in ascending `order`, then in the order they were signalled;
/// each is unsignalled just before its handler runs, so a signal that arrives during the handler
/// runs it again. Unlike CFRunLoop, `signal()` also wakes the loop. A source belongs to one loop
/// (in any number of its modes).
public final class LoopSource: @unchecked Sendable {
    struct State: ItemState, @unchecked Sendable {  // the handler only ever runs on the loop thread
        var isValid = true
        var isSignalled = false
        var signalSequence: UInt64 = 0
        var perform: (() -> Void)?
        var link: LoopLink?
    }

    /// The source's state behind a lock word in the object itself (see `ItemCore`), for the same
    /// reason as an observer's (`LoopObserver.core`).
    @exclusivity(unchecked) var core: ItemCore<State>
    /// Beside `core`, not in it (see `ItemCore`); guarded by its loop's `state` lock.
    @exclusivity(unchecked) var membership = Membership()
    /// Its index in each mode's sources (`ModeSlots`); guarded by its loop's `state` lock.
    @exclusivity(unchecked) var positions = ModePositions<UInt32>()
    // The stored layout is in declaration order: what adding and removing a source touches
    // (its reference count, `core`, `membership`, `positions`) comes first, on as few cache
    // lines as it can (a removal in random order misses on each).

    /// Signalled sources run in ascending order.
    ///
    /// Any thread.
    public let order: Int
    /// A port's readiness (see `init(order:readiness:_:)`); nil for a custom source.
    private let readiness: (@Sendable () -> UInt64?)?
    /// Whether this is a port's source.
    var isPort: Bool { readiness != nil }
    private static let signalClock = Atomic<UInt64>(0)

    /// A process-wide increasing stamp: the order sources and ports became ready in.
    static func nextSignalStamp() -> UInt64 {
        signalClock.add(1, ordering: .relaxed).newValue
    }

    /// Creates a source whose `perform` runs when it is signalled.
    ///
    /// Any thread. The source does nothing until added to a loop.
    public convenience init(order: Int = 0, _ perform: sending @escaping () -> Void) {
        self.init(order: order, readiness: nil, perform)
    }

    /// With `readiness`, a port's source (version 1), served after the timers (step 2.5), not with
    /// the custom sources (step 2.3): it is ready while `readiness` gives a time (a signal stamp,
    /// 0 for a port in the middle of a delivery), whether or not it was signalled since.
    init(order: Int, readiness: (@Sendable () -> UInt64?)?, _ perform: sending @escaping () -> Void) {
        self.order = order
        self.readiness = readiness
        self.core = ItemCore(State(perform: perform))
    }

    /// Marks the source as ready and wakes its loop.
    ///
    /// Any thread. Signalling an already signalled source keeps its place in the queue.
    public func signal() {
        let loop: BoundLoop = withState { state in
            guard state.isValid else { return .none }
            if !state.isSignalled {
                state.isSignalled = true
                state.signalSequence = LoopSource.nextSignalStamp()
            }
            return state.boundLoop
        }
        loop.use { $0.sourceWasSignalled(port: isPort) }
    }

    /// Whether the source is still in service.
    ///
    /// Any thread.
    public var isValid: Bool { withState { $0.isValid } }

    /// Stops the source for good, removes it from its loop and releases its handler.
    ///
    /// Any thread, including from inside its own handler.
    public func invalidate() {
        var perform: (() -> Void)?
        retireItem { _, state in
            state.isSignalled = false
            perform = state.perform.take()
        }
        _ = perform  // let go of here, after the source's and its loop's locks
    }

    // MARK: Loop machinery

    /// The loop the source was added to, if any.
    var owner: Loop? { withState { $0.link?.loop } }

    /// Whether it is signalled, and since when; nil if not.
    var pendingSignal: UInt64? {
        if let readiness { return isValid ? readiness() : nil }
        return withState { $0.isValid && $0.isSignalled ? $0.signalSequence : nil }
    }

    /// Binds the source to `loop`; a source belongs to one loop for its whole life.
    func bind(to loop: Loop) -> (valid: Bool, signalled: Bool) {
        bindState(to: loop, kind: "LoopSource") { ($0.isValid, $0.isSignalled) }
    }

    /// Unsignals the source and returns its handler, or nil if another run got to it first.
    func takeSignal() -> (() -> Void)? {
        // Through `lockedState`, not `withState`: the handler would come back in an allocated
        // reabstraction thunk, once per callout.
        LoopSource.takeSignal(from: &lockedState, readiness: readiness)
    }

    private static func takeSignal(from state: inout State, readiness: (@Sendable () -> UInt64?)?) -> (() -> Void)? {
        guard state.isValid else { return nil }
        if let readiness {
            state.isSignalled = false
            return readiness() != nil ? state.perform : nil
        }
        guard state.isSignalled else { return nil }
        state.isSignalled = false
        return state.perform
    }
}
