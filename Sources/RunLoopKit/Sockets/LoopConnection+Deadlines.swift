// The connection's one timer: its connect, idle and linger deadlines. Loop thread only.

extension LoopConnection {
    /// CLOCK_MONOTONIC_COARSE in nanoseconds, for `lastActivity`: every read and write records
    /// the time, and the coarse clock (the kernel's last tick, a few milliseconds behind at most,
    /// which an idle limit does not notice) is a plain memory read where `ContinuousClock.now`
    /// reads the time stamp counter.
    static var coarseNow: Int64 { Platform.coarseClockNanoseconds() }

    /// The coarse clock's step: an idle deadline that the coarse clock does not see as passed yet
    /// is re-armed this much later at least, not in a burst of short timers.
    static let coarseStep: Duration = .nanoseconds(Platform.coarseClockResolution())

    /// How long ago bytes last moved, on the coarse clock.
    var idleFor: Duration { .nanoseconds(LoopConnection.coarseNow - core.lastActivity) }

    /// The one timer of a connection: its connect deadline while connecting, its idle deadline
    /// while open, its linger deadline while closing. Re-armed lazily: traffic only updates
    /// `lastActivity`.
    func armDeadline(at fireDate: ContinuousClock.Instant? = nil) {
        guard !isClosed else { return }
        let deadline: ContinuousClock.Instant
        if let fireDate {
            deadline = fireDate
        } else {
            // Lingering: the linger deadline stands, whatever the idle limit.
            guard core.lifecycle != .lingering else { return }
            guard let idle = withSettings({ $0.idleTimeout }) else {
                // No idle limit any more: the timer goes, so that it does not wake the loop.
                if !isConnecting { dropTimer() }
                return
            }
            deadline = .now + max(idle - idleFor, LoopConnection.coarseStep)
        }
        if let timer = withResidency({ $0.timer }) {
            timer.fireDate = deadline
            return
        }
        // The timer reaches the connection through its source, which holds the connection while
        // it is in its loop: no reference from the timer (which the connection holds) back to it.
        // Repeating, so that it stays valid once it has fired (a one-shot timer invalidates itself)
        // and each later deadline is a new fire date, not a new timer: the interval only matters
        // if nothing re-arms it, and an hour keeps such a timer from waking the loop for nothing.
        let source = descriptorSource
        let timer = LoopTimer(fireAt: deadline, interval: .seconds(3_600)) { _ in
            (source.heldClient as? LoopConnection)?.deadlinePassed()
        }
        loop.attach(timer, to: self)
    }

    /// Invalidates the connection's timer, if it has one.
    func dropTimer() {
        let timer = withResidency { residency in
            defer { residency.timer = nil }
            return residency.timer
        }
        timer?.invalidate()
    }

    private func deadlinePassed() {
        apply(.deadlinePassed)
    }
}
