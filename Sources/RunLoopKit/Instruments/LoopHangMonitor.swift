import Synchronization

/// Reports the stretches in which a loop's thread worked without sleeping for longer than a
/// threshold: the hangs and stutters of an event loop.
///
/// A stretch runs from the moment the loop wakes up (`afterWaiting`, or the start of a run) to the
/// moment it goes back to sleep (`beforeWaiting`, or the end of the run). That is the latency
/// every event arriving meanwhile suffers, so a long stretch means something blocks the thread:
/// the report says how long, in which mode, which phase the time was spent after, and which
/// callout (timer, source, block, observer, …) was the slowest.
///
/// ```swift
/// let monitor = LoopHangMonitor(loop: loop, threshold: .milliseconds(50)) { report in
///     print("hang: \(report.duration) in \(report.mode), mostly a \(report.slowestCallout?.description ?? "?")")
/// }
/// // ...
/// monitor.invalidate()
/// ```
///
/// It is an instrument (see `LoopInstrument`): attached by `init`, detached by `invalidate()`.
/// When nothing is reported it does not allocate; it reads the clock a few times per iteration.
/// Stretches are reported when they end, so a thread blocked for good is never reported.
///
/// Thread rules: `LoopHangMonitor` is `Sendable`; create and invalidate it on any thread. The
/// handler runs on the loop's thread, inside the iteration that ended the stretch, before the
/// loop sleeps: keep it short and do not run the loop from it.
public final class LoopHangMonitor: LoopInstrument, @unchecked Sendable {
    /// One stretch of work longer than the threshold.
    ///
    /// A value; `Sendable`.
    public struct Report: Sendable, Equatable, CustomStringConvertible {
        /// When the loop woke up (or the run started).
        public var start: ContinuousClock.Instant
        /// From waking up (or the start of the run) to going to sleep (or the end of the run).
        public var duration: Duration
        /// The mode the loop was running during the slowest part.
        public var mode: Loop.Mode
        /// The activity reached before the slowest part of the stretch: `.afterWaiting` for work
        /// done on waking (timers, descriptors, blocks), `.beforeSources` for blocks and sources
        /// run at the start of an iteration, the activity being observed for an observer.
        public var phase: Loop.Activity
        /// How long the loop stayed in `phase` (until the next activity or the end of the stretch).
        public var phaseDuration: Duration
        /// The kind of the longest callout of the stretch, nil if it made none.
        public var slowestCallout: LoopCalloutKind?
        /// How long that callout took (zero if none).
        public var slowestCalloutDuration: Duration
        /// The number of callouts made in the stretch.
        public var callouts: Int

        /// One line for logs: duration, mode, phase and slowest callout.
        public var description: String {
            var text =
                "\(humanDuration(LoopHangMonitor.ticks(duration))) without sleeping in mode \(mode.name); "
                + "\(humanDuration(LoopHangMonitor.ticks(phaseDuration))) of it after \(phase)"
            if let slowestCallout {
                text +=
                    "; slowest callout: a \(slowestCallout), \(humanDuration(LoopHangMonitor.ticks(slowestCalloutDuration)))"
            }
            return text
        }
    }

    /// Stretches longer than this are reported.
    ///
    /// Any thread.
    public let threshold: Duration

    private let handler: @Sendable (Report) -> Void
    private let loopIdentity: ObjectIdentifier
    private weak var loop: Loop?
    private let valid = Atomic<Bool>(true)
    private let thresholdTicks: Ticks

    // Loop thread only. Times are ticks (nanoseconds of `TickClock`); 0 means "none".
    private var stretchStart: Ticks = 0
    private var runDepth = 0
    private var calloutCount = 0
    private var phase: Loop.Activity = .entry
    private var phaseStart: Ticks = 0
    private var mode: Loop.Mode = .default
    private var slowestPhase: Loop.Activity = .entry
    private var slowestPhaseDuration: Ticks = 0
    private var slowestPhaseMode: Loop.Mode = .default
    private var slowestKind: LoopCalloutKind?
    private var slowestCalloutDuration: Ticks = 0
    // Open callouts (nested runs nest them): start times and kinds.
    private var calloutStarts: InlineArray<16, Ticks> = .init(repeating: 0)
    private var calloutKinds: InlineArray<16, UInt8> = .init(repeating: 0)
    private var calloutDepth = 0

    /// Starts watching `loop`: stretches of work longer than `threshold` are passed to `handler`.
    ///
    /// Any thread; the monitor sees the loop from its next iteration (or run) on. The loop keeps
    /// the monitor until `invalidate()`; the monitor does not keep the loop alive.
    public init(loop: Loop, threshold: Duration, handler: @escaping @Sendable (Report) -> Void) {
        self.threshold = threshold
        self.thresholdTicks = LoopHangMonitor.ticks(threshold)
        self.handler = handler
        self.loop = loop
        self.loopIdentity = ObjectIdentifier(loop)
        loop.attach(self)
    }

    /// Whether the monitor still reports: false after `invalidate()`.
    ///
    /// Any thread.
    public var isValid: Bool { valid.load(ordering: .acquiring) }

    /// Stops reporting and detaches the monitor from its loop.
    ///
    /// Any thread, including the handler. Once it has returned no new report is started (one the
    /// loop's thread is already delivering may finish).
    public func invalidate() {
        guard valid.exchange(false, ordering: .acquiringAndReleasing) else { return }
        loop?.detach(self)
    }

    static func ticks(_ duration: Duration) -> Ticks {
        duration.saturatingNanoseconds
    }

    // MARK: LoopInstrument

    /// Loop thread (instrument hook): starts measuring if attached in the middle of a run.
    public func loopWillIterate(_ loop: Loop, mode: Loop.Mode, at time: ContinuousClock.Instant) {
        guard ObjectIdentifier(loop) == loopIdentity, stretchStart == 0 else { return }
        // Attached in the middle of a run: start measuring here.
        begin(at: TickClock.ticks(time), activity: .beforeTimers, mode: mode)
    }

    /// Loop thread (instrument hook): starts, splits or ends a stretch at each phase.
    public func loopDidReach(
        _ loop: Loop, _ activity: Loop.Activity, mode: Loop.Mode, at time: ContinuousClock.Instant
    ) {
        guard ObjectIdentifier(loop) == loopIdentity else { return }
        let now = TickClock.ticks(time)
        switch activity {
        case .entry:
            runDepth += 1
            if stretchStart == 0 {
                begin(at: now, activity: .entry, mode: mode)
            } else {
                enter(activity, mode: mode, at: now)  // a nested run: the same stretch goes on
            }
        case .exit:
            runDepth = max(0, runDepth - 1)
            if runDepth == 0 {
                end(at: now)
            } else {
                enter(activity, mode: mode, at: now)
            }
        case .beforeWaiting:
            end(at: now)
        case .afterWaiting:
            begin(at: now, activity: .afterWaiting, mode: mode)
        default:
            enter(activity, mode: mode, at: now)
        }
    }

    /// Loop thread (instrument hook): notes when a callout starts.
    public func loopWillCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant) {
        guard ObjectIdentifier(loop) == loopIdentity else { return }
        if calloutDepth < calloutStarts.count {
            calloutStarts[calloutDepth] = TickClock.ticks(time)
            calloutKinds[calloutDepth] = UInt8(kind.rawValue)
        }
        calloutDepth += 1
    }

    /// Loop thread (instrument hook): keeps the stretch's slowest callout.
    public func loopDidCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant) {
        guard ObjectIdentifier(loop) == loopIdentity, calloutDepth > 0 else { return }
        calloutDepth -= 1
        guard calloutDepth < calloutStarts.count, stretchStart != 0 else { return }
        let start = calloutStarts[calloutDepth]
        // A callout that began before this stretch ran a nested loop that slept: not one piece of work.
        guard start >= stretchStart else { return }
        calloutCount += 1
        let duration = TickClock.ticks(time) - start
        if duration > slowestCalloutDuration {
            slowestCalloutDuration = duration
            slowestKind = LoopCalloutKind(rawValue: Int(calloutKinds[calloutDepth]))
        }
    }

    // MARK: Stretches

    private func begin(at now: Ticks, activity: Loop.Activity, mode: Loop.Mode) {
        stretchStart = now
        calloutCount = 0
        slowestKind = nil
        slowestCalloutDuration = 0
        slowestPhaseDuration = -1
        phase = activity
        phaseStart = now
        self.mode = mode
    }

    /// A new activity within the stretch: closes the time spent after the previous one.
    private func enter(_ activity: Loop.Activity, mode: Loop.Mode, at now: Ticks) {
        guard stretchStart != 0 else { return }
        closePhase(at: now)
        phase = activity
        phaseStart = now
        self.mode = mode
    }

    private func closePhase(at now: Ticks) {
        let spent = now - phaseStart
        if spent > slowestPhaseDuration {
            slowestPhaseDuration = spent
            slowestPhase = phase
            slowestPhaseMode = mode
        }
    }

    private func end(at now: Ticks) {
        guard stretchStart != 0 else { return }
        let start = stretchStart
        stretchStart = 0
        let duration = now - start
        guard duration > thresholdTicks, valid.load(ordering: .acquiring) else { return }
        closePhase(at: now)
        handler(
            Report(
                start: TickClock.instant(start), duration: .nanoseconds(duration), mode: slowestPhaseMode,
                phase: slowestPhase, phaseDuration: .nanoseconds(slowestPhaseDuration), slowestCallout: slowestKind,
                slowestCalloutDuration: .nanoseconds(slowestCalloutDuration), callouts: calloutCount))
    }
}
