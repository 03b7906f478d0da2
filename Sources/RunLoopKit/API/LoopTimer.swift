import Synchronization

/// A timer that fires on a loop, once or repeatedly, in the modes it was added to.
///
/// A timer belongs to one loop (in any number of its modes). It never fires before its fire date
/// and, given a tolerance, may fire up to `tolerance` after it; the loop uses that slack to
/// coalesce wake-ups. A repeating timer that missed fires (the loop was busy or running another
/// mode) fires once when it can and keeps its phase: the next fire date is the first
/// `start + k × interval` after now. The handler runs on the loop's thread.
public final class LoopTimer: @unchecked Sendable {
    /// What a repeating timer does about fires it missed because the loop was busy or running a
    /// mode without it.
    public enum MissedFirePolicy: Sendable, Hashable {
        /// One callout for all the missed fires, then the original phase: the next fire is the
        /// first `start + k × interval` after now (CFRunLoop's behaviour; the default).
        case keepPhase
        /// One callout per missed fire, on successive iterations, until the timer has caught up.
        case burst
        /// One callout, and the next fire is `interval` after that late callout (the phase moves).
        case delay
    }

    struct State: ItemState, @unchecked Sendable {  // the handler only ever runs on the loop thread
        // What adding and invalidating a timer read and write first, the dates only a reschedule
        // reads last (see the note on the stored layout below).

        /// `fireOffset` and `fireOffset + tolerance` in ticks, kept in step with them: a loop reads
        /// them for every heap entry it pushes, and the conversion is 128-bit arithmetic.
        var fireTicks: Ticks = 0
        var latestTicks: Ticks = 0
        /// Bumped whenever the schedule changes; heap entries of older generations are stale.
        var generation: UInt64 = 0
        var handler: ((LoopTimer) -> Void)?
        var link: LoopLink?
        var missedFirePolicy: MissedFirePolicy = .keepPhase
        var isValid = true
        /// The fire date as an offset from `TickClock.origin`: `Duration` has a fixed layout and
        /// `ContinuousClock.Instant` does not (it is resilient), and a resilient field made every
        /// access to the state a witness-table call.
        var fireOffset: Duration
        var tolerance: Duration

        var fireDate: ContinuousClock.Instant {
            get { TickClock.origin + fireOffset }
            set { fireOffset = newValue - TickClock.origin }
        }

        mutating func updateTicks() {
            fireTicks = TickClock.ticks(offset: fireOffset)
            // Compared as attoseconds: `Duration`'s operators and `.zero` are calls into the
            // standard library, and this runs for every timer created or rescheduled.
            latestTicks =
                tolerance.attoseconds == 0
                ? fireTicks : TickClock.ticks(offset: fireOffset + tolerance.saturated)
        }
    }

    /// What a loop needs to place the timer in its heaps.
    struct Schedule {
        var fireDate: Ticks
        var latest: Ticks
        var generation: UInt64
        var isValid: Bool

        init(_ state: State) {
            fireDate = state.fireTicks
            latest = state.latestTicks
            generation = state.generation
            isValid = state.isValid
        }
    }

    /// The timer's state behind a lock word in the timer itself rather than a `Locked` (see
    /// `ItemCore`), because its critical sections are a few field accesses and a server schedules
    /// timers by the hundred thousand (100,000 due timers fired in 106 instead of 241 ms, with the
    /// other firing changes of the same step).
    @exclusivity(unchecked) var core: ItemCore<State>
    /// `state.generation` while the timer is valid, `.max` once invalidated: written under the
    /// timer's lock, read without it by loops checking whether a heap entry is stale.
    let liveGeneration = Atomic<UInt64>(0)
    /// Beside `core`, not in it (see `ItemCore`); guarded by its loop's `state` lock.
    @exclusivity(unchecked) var membership = Membership()
    // The stored layout is in declaration order: what adding and invalidating a timer touches
    // (its reference count, `core`'s first fields and its lock word, `liveGeneration`,
    // `membership`) comes first, on as few cache lines as it can (timers added and removed in
    // random order miss on each); `interval`, read when a timer fires, last.

    /// The repeat interval, or nil for a one-shot timer.
    ///
    /// Any thread.
    public let interval: Duration?

    /// Creates a timer that fires at `fireAt`, then every `interval` if one is given.
    ///
    /// Any thread. An `interval` of zero or less makes a one-shot timer (as in CFRunLoop); a
    /// negative `tolerance` counts as zero. The timer does nothing until added to a loop.
    public init(
        fireAt: ContinuousClock.Instant, interval: Duration? = nil, tolerance: Duration = .zero,
        missedFirePolicy: MissedFirePolicy = .keepPhase,
        _ handler: sending @escaping (LoopTimer) -> Void
    ) {
        self.interval = interval.flatMap { $0.attoseconds > 0 ? $0 : nil }
        // A tolerance of zero is kept as given: `.zero` is a call into the standard library, made
        // only for a negative one. The handler is consumed: a copy of the (owned) `sending`
        // parameter costs a retain and a release per timer (docs/performance-notes.md#instructions-per-timer).
        var state = State(
            handler: consume handler, missedFirePolicy: missedFirePolicy, fireOffset: fireAt - TickClock.origin,
            tolerance: tolerance.attoseconds < 0 ? .zero : tolerance)
        state.updateTicks()
        self.core = ItemCore(consume state)
    }

    /// Creates a timer that fires `delay` from now, then every `interval` if one is given.
    ///
    /// Any thread. A negative `delay` means now.
    public convenience init(
        after delay: Duration, repeating interval: Duration? = nil, tolerance: Duration = .zero,
        missedFirePolicy: MissedFirePolicy = .keepPhase,
        _ handler: sending @escaping (LoopTimer) -> Void
    ) {
        self.init(
            fireAt: ContinuousClock.now.advanced(bySaturating: delay), interval: interval, tolerance: tolerance,
            missedFirePolicy: missedFirePolicy, handler)
    }

    /// What the timer does about missed fires (see `MissedFirePolicy`). Takes effect from the next
    /// callout.
    ///
    /// Any thread.
    public var missedFirePolicy: MissedFirePolicy {
        get { withState { $0.missedFirePolicy } }
        set { withState { $0.missedFirePolicy = newValue } }
    }

    /// When the timer fires next. Setting it re-arms the timer (a no-op once invalidated).
    ///
    /// Any thread.
    public var fireDate: ContinuousClock.Instant {
        get { withState { $0.fireDate } }
        set { reschedule { $0.fireDate = newValue } }
    }

    /// How late after its fire date the timer may fire, letting the loop coalesce wake-ups.
    ///
    /// Any thread. Negative values count as zero.
    public var tolerance: Duration {
        get { withState { $0.tolerance } }
        set { reschedule { $0.tolerance = max(newValue, .zero) } }
    }

    /// Whether the timer can still fire: false after `invalidate()` or after a one-shot fired.
    ///
    /// Any thread.
    public var isValid: Bool { withState { $0.isValid } }

    /// Stops the timer for good and removes it from its loop's modes, releasing its handler.
    ///
    /// Any thread, including from inside the timer's own handler.
    public func invalidate() {
        var handler: ((LoopTimer) -> Void)?
        retireItem { timer, state in
            timer.liveGeneration.store(.max, ordering: .releasing)
            handler = state.handler.take()
        }
        _ = handler  // let go of here, after the timer's and its loop's locks
    }

    /// Calls the handler now, on the calling thread, without changing the schedule of a repeating
    /// timer; a one-shot timer is invalidated afterwards.
    ///
    /// Call it on the loop's thread (or before the timer is added), since the handler is not
    /// required to be thread-safe.
    public func fire() {
        guard let handler = withState({ $0.isValid ? $0.handler : nil }) else { return }
        handler(self)
        if interval == nil { invalidate() }
    }

    // MARK: Loop machinery

    var schedule: Schedule { withState { Schedule($0) } }

    /// Binds the timer to `loop` (a timer belongs to one loop for its whole life); returns its
    /// schedule, read under the same lock, or nil if it is invalid.
    func bind(to loop: Loop) -> Schedule? {
        bindState(to: loop, kind: "LoopTimer") { $0.isValid ? Schedule($0) : nil }
    }

    private func reschedule(_ change: (inout State) -> Void) {
        let loop: BoundLoop = withState { state in
            guard state.isValid else { return .none }
            change(&state)
            state.updateTicks()
            state.generation &+= 1
            liveGeneration.store(state.generation, ordering: .releasing)
            return state.boundLoop
        }
        loop.use { $0.timerDidReschedule(self) }
    }

    /// Claims the entry of `generation` for firing: returns the handler, and a new generation that
    /// makes every other heap entry stale so the timer cannot fire twice (or re-enter) meanwhile.
    func claim(generation: UInt64) -> (handler: (LoopTimer) -> Void, generation: UInt64)? {
        withState { state in
            guard state.isValid, state.generation == generation, let handler = state.handler else { return nil }
            state.generation &+= 1
            liveGeneration.store(state.generation, ordering: .releasing)
            return (handler, state.generation)
        }
    }

    /// After a callout: a one-shot timer is invalidated; a repeating one moves to its next fire
    /// date in phase, unless the handler re-armed or invalidated it. Returns true if the loop must
    /// push the new schedule into its heaps.
    func didFire(claimed generation: UInt64, calledAt: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Bool {
        guard let interval else {
            let stillClaimed = withState { $0.generation == generation }
            if stillClaimed { invalidate() }
            return false
        }
        return withState { state in
            guard state.isValid, state.generation == generation else { return false }
            switch state.missedFirePolicy {
            case .keepPhase:
                state.fireDate = LoopTimer.nextFireDate(after: state.fireDate, interval: interval, now: now)
            case .burst:
                state.fireDate = state.fireDate.advanced(bySaturating: interval)
            case .delay:
                state.fireDate = max(state.fireDate, calledAt).advanced(bySaturating: interval)
            }
            state.updateTicks()
            state.generation &+= 1
            liveGeneration.store(state.generation, ordering: .releasing)
            return true
        }
    }

    /// The first `start + k × interval` (k ≥ 1) strictly after `now`: missed fires collapse and the
    /// phase is kept.
    static func nextFireDate(
        after start: ContinuousClock.Instant, interval: Duration, now: ContinuousClock.Instant
    ) -> ContinuousClock.Instant {
        var next = start.advanced(bySaturating: interval)
        if next > now {
            return next
        }
        let ratio = ((now - start) / interval).rounded(.down)
        let missed = Int(min(ratio, 4.0e15))
        next = start.advanced(bySaturating: interval * max(missed, 1))
        while next <= now {
            next = next.advanced(bySaturating: interval)
        }
        return next
    }
}

extension ContinuousClock.Instant {
    /// `self + duration`, clamped about 290 years out instead of overflowing.
    func advanced(bySaturating duration: Duration) -> ContinuousClock.Instant {
        self + duration.saturated
    }
}

extension Duration {
    /// The duration clamped to about ±290 years, so that adding it to an instant cannot overflow.
    var saturated: Duration {
        let limit = Duration.saturationLimit
        if self > limit { return limit }
        if self < .zero - limit { return .zero - limit }
        return self
    }

    /// About 292 years: computed once (building it is 128-bit arithmetic).
    private static let saturationLimit = Duration.seconds(Int64.max / 1_000_000_000)
}
