// A loop driven by another loop (GLib's main loop under GTK, a program's own epoll loop), as
// libuv's `uv_backend_fd` and `uv_backend_timeout` allow: the other loop polls the backend's
// descriptor with the time of the next timer as its timeout, and runs this loop without sleeping
// when either comes.

extension Loop {
    /// When `mode` next has something due: the earliest fire date of its timers and of the
    /// scheduled blocks that may run in it, as CFRunLoop's `CFRunLoopGetNextTimerFireDate`; nil
    /// when it has none. `.common`: the earliest of the common modes'.
    ///
    /// Any thread. A date already past means something is due now. Another loop that drives this
    /// one waits on ``backendDescriptor`` until this date at the latest.
    public func nextTimerFireDate(forMode mode: Mode) -> ContinuousClock.Instant? {
        let (timers, isCommon, commonModes) = withTables { state -> (Ticks?, Bool, Set<Mode>) in
            let modes = mode == .common ? state.commonModes : [mode]
            var earliest: Ticks?
            for each in modes {
                let top = state.withExistingItems(of: each) { $0.liveTopByFireDate()?.entry.key } ?? nil
                if let top, earliest.map({ top < $0 }) ?? true { earliest = top }
            }
            return (earliest, mode == .common || state.commonModes.contains(mode), state.commonModes)
        }
        let blocks = nextScheduledFireTicks(for: mode == .common ? commonModes : [mode], isCommon: isCommon)
        let earliest = [timers, blocks].compactMap { $0 }.min()
        return earliest.map(TickClock.instant)
    }

    /// A descriptor that is readable whenever the loop has work: a descriptor it watches is ready,
    /// another thread posted a block, signalled a source or woke it, or a timer's wake-up came.
    /// Another loop (GLib's, a program's own `epoll_wait`) polls it for reading, with
    /// ``nextTimerFireDate(forMode:)`` as its timeout, and then calls `run(mode:for: .zero)` on
    /// this loop's thread, which serves what is ready without sleeping.
    ///
    /// Loop thread only (the thread that will call `run`): the first read starts the loop's
    /// backend if no run has yet. It is libevent's epoll descriptor, owned by the loop: poll it,
    /// never read it or close it. From the first read on, each pass also polls the backend, and a
    /// source signalled or a block performed on the loop's own thread outside a run makes the
    /// descriptor readable too. `-1` if libevent was told not to use epoll (`EVENT_NOEPOLL` in the
    /// environment).
    public var backendDescriptor: Int32 {
        preconditionLoopThread("Loop.backendDescriptor")
        return ensureBackend().epollDescriptor() ?? -1
    }
}
