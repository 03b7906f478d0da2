/// A timer locked to a frame grid, like `CADisplayLink`: it calls its handler once per frame, at
/// `framesPerSecond` frames a second, on the thread of the loop it was added to.
///
/// Frames lie on a fixed grid that starts when the link is first added to a loop: frame *k* is at
/// `start + k × frameDuration`. Each callout sees `timestamp` (this frame's grid time, never the
/// late wall-clock time of the callout) and `targetTimestamp` (the next frame). A frame the loop
/// could not serve before the next one began — the loop was busy, or a handler ran long — is
/// skipped, never made up: callouts are never bunched, and the next callout is on the next grid
/// point. Add the link to `.common` to keep it running while the loop runs `.tracking`.
///
/// The loop keeps the link (and its handler) alive while the link is in one of its modes, with no
/// other reference to it: until it is removed from every mode, `invalidate()` is called or the
/// loop ends. A link in no loop goes with its last reference. Like a timer, a link belongs to one
/// loop, in any number of its modes, and keeps those modes non-empty (also while paused).
///
/// Thread rules: `FrameLink` is `Sendable`. Every member may be used from any thread; the handler
/// runs on the loop's thread. `timestamp` and `targetTimestamp` are meant to be read in the handler.
public final class FrameLink: @unchecked Sendable {
    struct State: @unchecked Sendable {  // the handler only ever runs on the loop thread
        var handler: ((FrameLink) -> Void)?
        var framesPerSecond: Int
        var frameDuration: Duration
        /// The origin of the grid: frames are at `anchor + k × frameDuration`.
        var anchor: ContinuousClock.Instant
        var timestamp: ContinuousClock.Instant
        var targetTimestamp: ContinuousClock.Instant
        var isPaused = false
        var isValid = true
        /// The timer driving the link, created when the link is first added to a loop.
        var timer: LoopTimer?
        weak var loop: Loop?
        var modes: [Loop.Mode] = []

        /// The first grid point strictly after `now`.
        func nextFrame(after now: ContinuousClock.Instant) -> ContinuousClock.Instant {
            LoopTimer.nextFireDate(after: anchor, interval: frameDuration, now: max(now, anchor))
        }
    }

    /// How far out a paused link's timer is parked: it stays in its modes but never wakes the loop.
    private static let parked = Duration.seconds(100 * 365 * 86_400)

    private let state: Locked<State>

    /// Creates a link that calls `handler` once per frame at `framesPerSecond` (60 by default)
    /// once it is added to a loop with `add(to:forMode:)`.
    ///
    /// Any thread. `framesPerSecond` must be positive (a programmer error otherwise). The handler
    /// runs on the loop's thread and may read `timestamp`, `targetTimestamp` and change the link.
    public init(framesPerSecond: Int = 60, _ handler: sending @escaping (FrameLink) -> Void) {
        precondition(framesPerSecond > 0, "RunLoopKit: FrameLink needs a positive frame rate, not \(framesPerSecond)")
        let now = ContinuousClock.now
        let duration = FrameLink.duration(of: framesPerSecond)
        state = Locked(
            State(
                handler: handler, framesPerSecond: framesPerSecond, frameDuration: duration, anchor: now,
                timestamp: now, targetTimestamp: now + duration))
    }

    private static func duration(of framesPerSecond: Int) -> Duration {
        .seconds(1) / framesPerSecond
    }

    // MARK: Frames

    /// The grid time of the current frame: in the handler, the frame being served (not the
    /// instant of the callout, which is a little later). Before the first frame, the instant the
    /// link was first added to a loop (or created).
    ///
    /// Any thread.
    public var timestamp: ContinuousClock.Instant { state.withLock { $0.timestamp } }

    /// The grid time of the next frame: `timestamp + frameDuration`. Work done in the handler
    /// should be ready by then.
    ///
    /// Any thread.
    public var targetTimestamp: ContinuousClock.Instant { state.withLock { $0.targetTimestamp } }

    /// The time between two frames: one second divided by `preferredFramesPerSecond`.
    ///
    /// Any thread.
    public var frameDuration: Duration { state.withLock { $0.frameDuration } }

    /// The frame rate, e.g. 60, 120 or 144 (any positive rate works). Changing it re-grids from
    /// the current frame: the next frames are at `timestamp + k × newFrameDuration`.
    ///
    /// Any thread, including the handler. A rate of zero or less is a programmer error.
    public var preferredFramesPerSecond: Int {
        get { state.withLock { $0.framesPerSecond } }
        set {
            precondition(newValue > 0, "RunLoopKit: FrameLink needs a positive frame rate, not \(newValue)")
            state.withLock { state in
                guard state.isValid, newValue != state.framesPerSecond else { return }
                state.framesPerSecond = newValue
                state.frameDuration = FrameLink.duration(of: newValue)
                state.anchor = state.timestamp
                state.targetTimestamp = state.timestamp + state.frameDuration
                // A timer's interval is fixed: a new timer takes over the link's modes.
                guard let old = state.timer, let loop = state.loop else { return }
                let fireAt = state.isPaused ? .now + FrameLink.parked : state.nextFrame(after: .now)
                let timer = makeTimer(fireAt: fireAt, interval: state.frameDuration)
                state.timer = timer
                old.invalidate()
                for mode in state.modes { loop.add(timer, forMode: mode) }
            }
        }
    }

    /// Whether callouts are suspended. A paused link stays in its modes but makes no callouts
    /// and no wake-ups; resumed, it continues on its original grid (the frames in between are
    /// skipped, not made up).
    ///
    /// Any thread, including the handler.
    public var isPaused: Bool {
        get { state.withLock { $0.isPaused } }
        set {
            state.withLock { state in
                guard state.isValid, newValue != state.isPaused else { return }
                state.isPaused = newValue
                let now = ContinuousClock.now
                state.timer?.fireDate = newValue ? now + FrameLink.parked : state.nextFrame(after: now)
            }
        }
    }

    /// Whether the link can still make callouts: false after `invalidate()`, or once the thread of
    /// its loop has exited (which tears the loop down).
    ///
    /// Any thread.
    public var isValid: Bool { state.withLock { $0.isValid && ($0.timer?.isValid ?? true) } }

    // MARK: Loops

    /// Adds the link to `mode` of `loop` (`.common` for every common mode, so that it keeps running
    /// during `.tracking`). The first add starts the frame grid: the first frame is one
    /// `frameDuration` later.
    ///
    /// Any thread. A link belongs to one loop; adding it to a second loop is a programmer error.
    /// Adding an invalidated link, or adding to a loop that has ended, does nothing.
    public func add(to loop: Loop, forMode mode: Loop.Mode) {
        state.withLock { state in
            guard state.isValid, !loop.hasEnded else { return }
            bindOwner(&state.loop, to: loop, kind: "FrameLink")
            if state.timer == nil {
                let now = ContinuousClock.now
                state.anchor = now
                state.timestamp = now
                state.targetTimestamp = now + state.frameDuration
                let fireAt = state.isPaused ? now + FrameLink.parked : state.targetTimestamp
                state.timer = makeTimer(fireAt: fireAt, interval: state.frameDuration)
            }
            state.loop = loop
            if !state.modes.contains(mode) { state.modes.append(mode) }
            loop.add(state.timer!, forMode: mode)
        }
    }

    /// Removes the link from `mode` of `loop`; it keeps its grid and its other modes.
    ///
    /// Any thread.
    public func remove(from loop: Loop, forMode mode: Loop.Mode) {
        // Removed after the link's lock: what the removal releases may call back into the link.
        let timer: LoopTimer? = state.withLock { state in
            guard let timer = state.timer, state.loop === loop else { return nil }
            state.modes.removeAll { $0 == mode }
            return timer
        }
        if let timer { loop.remove(timer, forMode: mode) }
    }

    /// Stops the link for good: removes it from every mode of its loop and releases the handler.
    ///
    /// Any thread, including the handler.
    public func invalidate() {
        // The handler goes after the lock and the timer's invalidation: its captures may call
        // back into the link or its loop as they go.
        let (timer, handler): (LoopTimer?, ((FrameLink) -> Void)?) = state.withLock { state in
            guard state.isValid else { return (nil, nil) }
            state.isValid = false
            state.modes = []
            return (state.timer.take(), state.handler.take())
        }
        timer?.invalidate()
        withExtendedLifetime(handler) {}
    }

    // MARK: The timer

    /// A `.keepPhase` timer on the grid: a late callout moves it to the first grid point after
    /// now, and a fire that comes too late for its frame is skipped below.
    /// The timer holds the link weakly and its loop keeps the link while the timer is in a mode
    /// (`keepAlive`): no cycle, so a link removed from every mode goes with its last reference.
    private func makeTimer(fireAt: ContinuousClock.Instant, interval: Duration) -> LoopTimer {
        let timer = LoopTimer(fireAt: fireAt, interval: interval, missedFirePolicy: .keepPhase) { [weak self] timer in
            self?.timerFired(timer)
        }
        timer.keepAlive(self)
        return timer
    }

    /// Loop thread: serves the frame whose grid point the timer fired for, or skips it if the next
    /// frame has already begun.
    private func timerFired(_ timer: LoopTimer) {
        let now = ContinuousClock.now
        let handler: ((FrameLink) -> Void)? = state.withLock { state in
            guard state.isValid, !state.isPaused, state.timer === timer else { return nil }
            // The grid point of this fire (the timer's schedule moves only after the callout). Read
            // under the link's lock, which pausing and resuming also take.
            let frame = timer.fireDate
            guard frame <= now else { return nil }  // re-armed for a later frame meanwhile
            let next = frame + state.frameDuration
            guard now < next else {
                // Missed: the loop reached this frame only after the next one began. Skip it and
                // wait for the next grid point, rather than calling out late or twice in a row.
                timer.fireDate = state.nextFrame(after: now)
                return nil
            }
            state.timestamp = frame
            state.targetTimestamp = next
            return state.handler
        }
        handler?(self)
    }
}
