import Synchronization

// Instruments watch a loop from the inside: phases, waits and every callout, with timestamps.
// Metrics, the tracer and the hang monitor are instruments. With none attached, each hook costs
// one load and branch; attaching or detaching from any thread takes effect at the loop's next
// iteration.

/// The kinds of callout a loop makes, as instruments report them.
public enum LoopCalloutKind: Int, Sendable, CaseIterable, CustomStringConvertible {
    /// A timer's handler.
    case timer
    /// A custom source's (or port's) perform.
    case source
    /// A descriptor (or signal) source's handler.
    case descriptor
    /// A block queued with `perform`.
    case block
    /// A Swift concurrency job.
    case job
    /// An observer's handler.
    case observer
    /// A drain of the main dispatch queue (`Loop.main` only).
    case mainQueue

    /// The kind's name as traces show it: `timer`, `source`, …, `main queue`.
    public var description: String {
        switch self {
        case .timer: "timer"
        case .source: "source"
        case .descriptor: "descriptor"
        case .block: "block"
        case .job: "job"
        case .observer: "observer"
        case .mainQueue: "main queue"
        }
    }
}

/// Something that watches a loop from its own thread. Every method runs on the loop's thread,
/// must not run the loop, and should be quick: it runs inside the iteration it measures.
/// Times are `ContinuousClock` instants read once per event.
public protocol LoopInstrument: AnyObject, Sendable {
    /// An iteration of a run in `mode` starts (before `beforeTimers`).
    func loopWillIterate(_ loop: Loop, mode: Loop.Mode, at time: ContinuousClock.Instant)
    /// The loop is about to sleep in the kernel.
    func loopWillWait(_ loop: Loop, at time: ContinuousClock.Instant)
    /// The loop has woken up.
    func loopDidWait(_ loop: Loop, at time: ContinuousClock.Instant)
    /// A callout is about to run.
    func loopWillCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant)
    /// A callout has returned.
    func loopDidCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant)
    /// A block, job or port message is about to be handled, `queueDelay` after it was posted (only
    /// work posted while an instrument was attached is measured).
    func loopDidDequeue(_ loop: Loop, _ kind: LoopCalloutKind, queueDelay: Duration)
    /// A phase observers are told about (`entry`, `beforeTimers`, …) is reached.
    func loopDidReach(_ loop: Loop, _ activity: Loop.Activity, mode: Loop.Mode, at time: ContinuousClock.Instant)
}

/// Default implementations: an instrument implements only the hooks it needs. Loop thread.
extension LoopInstrument {
    /// Does nothing.
    public func loopWillIterate(_ loop: Loop, mode: Loop.Mode, at time: ContinuousClock.Instant) {}
    /// Does nothing.
    public func loopWillWait(_ loop: Loop, at time: ContinuousClock.Instant) {}
    /// Does nothing.
    public func loopDidWait(_ loop: Loop, at time: ContinuousClock.Instant) {}
    /// Does nothing.
    public func loopWillCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant) {}
    /// Does nothing.
    public func loopDidCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant) {}
    /// Does nothing.
    public func loopDidDequeue(_ loop: Loop, _ kind: LoopCalloutKind, queueDelay: Duration) {}
    /// Does nothing.
    public func loopDidReach(
        _ loop: Loop, _ activity: Loop.Activity, mode: Loop.Mode, at time: ContinuousClock.Instant
    ) {}
}

extension Loop {
    /// Attaches `instrument`; it sees the loop from its next iteration on.
    ///
    /// Any thread. Attaching it twice does nothing; so does attaching it to a loop that has ended.
    public func attach(_ instrument: any LoopInstrument) {
        let attached = instrumentRegistry.withLock { registry in
            // An ended loop would keep the instrument for nothing.
            guard !hasEnded, !registry.contains(where: { $0 === instrument }) else { return false }
            registry.append(instrument)
            return true
        }
        guard attached else { return }
        instrumentsAttached.store(true, ordering: .relaxed)
        instrumentsChanged.store(true, ordering: .releasing)
        wakeUpIfForeign()
    }

    /// Detaches `instrument`; it sees nothing after the loop's current iteration.
    ///
    /// Any thread.
    public func detach(_ instrument: any LoopInstrument) {
        let empty = instrumentRegistry.withLock { registry in
            registry.removeAll { $0 === instrument }
            return registry.isEmpty
        }
        if empty { instrumentsAttached.store(false, ordering: .relaxed) }
        instrumentsChanged.store(true, ordering: .releasing)
        // A sleeping loop still holds its copy of the instruments: woken, it lets this one go.
        wakeUpIfForeign()
    }

    /// Loop thread: picks up attached and detached instruments.
    func refreshInstruments() {
        guard instrumentsChanged.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let current = instrumentRegistry.withLock { $0 }
        instruments = current.isEmpty ? nil : current
    }

    // Hooks, called by the iteration. Each is one branch when no instrument is attached.

    @inline(__always)
    func instrumentIteration(_ mode: Mode) {
        guard let instruments else { return }
        let now = ContinuousClock.now
        for instrument in instruments { instrument.loopWillIterate(self, mode: mode, at: now) }
    }

    @inline(__always)
    func instrumentWait(_ starting: Bool) {
        guard let instruments else { return }
        let now = ContinuousClock.now
        for instrument in instruments {
            if starting {
                instrument.loopWillWait(self, at: now)
            } else {
                instrument.loopDidWait(self, at: now)
            }
        }
    }

    @inline(__always)
    func instrumentPhase(_ activity: Activity, _ mode: Mode) {
        guard let instruments else { return }
        let now = ContinuousClock.now
        for instrument in instruments { instrument.loopDidReach(self, activity, mode: mode, at: now) }
    }

    /// Runs `body` as a callout of `kind`, reported to the instruments.
    @inline(__always)
    func callOut<R>(_ kind: LoopCalloutKind, postedAt: Ticks = 0, _ body: () -> R) -> R {
        guard let instruments else { return body() }
        let start = ContinuousClock.now
        if postedAt != 0 { instrumentDequeue(kind, postedAt: postedAt, at: start) }
        for instrument in instruments { instrument.loopWillCallOut(self, kind, at: start) }
        let result = body()
        let end = ContinuousClock.now
        for instrument in instruments { instrument.loopDidCallOut(self, kind, at: end) }
        return result
    }

    /// Reports the queue delay of work posted at `postedAt` (ticks; 0 means not stamped).
    @inline(__always)
    func instrumentDequeue(_ kind: LoopCalloutKind, postedAt: Ticks, at now: ContinuousClock.Instant = .now) {
        guard let instruments, postedAt != 0 else { return }
        let delay = Duration.nanoseconds(max(0, TickClock.ticks(now) - postedAt))
        for instrument in instruments { instrument.loopDidDequeue(self, kind, queueDelay: delay) }
    }

    /// Whether posted work should carry its posting time (only while an instrument listens).
    var stampsPostedWork: Bool { instrumentsAttached.load(ordering: .relaxed) }
}
