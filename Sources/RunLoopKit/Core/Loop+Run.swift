import Synchronization

// Running a loop. `runOnce` below is the iteration, step by step as docs/Design.md numbers it.

extension Loop {
    /// Runs the loop in `.default` until it is stopped or `.default` has nothing left to serve.
    ///
    /// Loop thread only. Unlike Foundation's `RunLoop.run()`, `stop()` does end it.
    public func run() {
        preconditionLoopThread("Loop.run()")
        while true {
            let result = runSpecific(.default, deadline: RunDeadline(after: nil), returnAfterSourceHandled: false)
            if result == .stopped || result == .finished { return }
        }
    }

    /// Runs the loop once in `mode` until `timeout` passes, `stop()` is called, the mode has nothing
    /// left to serve, or (with `returnAfterSourceHandled`) a source was handled.
    ///
    /// Loop thread only; may be called from inside a callout (a nested run). A zero or negative
    /// `timeout` serves what is ready without sleeping. Running `.common` returns `.finished`.
    @discardableResult
    public func run(mode: Mode = .default, for timeout: Duration, returnAfterSourceHandled: Bool = false)
        -> RunResult
    {
        preconditionLoopThread("Loop.run(mode:for:)")
        return runSpecific(
            mode, deadline: RunDeadline(after: timeout), returnAfterSourceHandled: returnAfterSourceHandled)
    }

    /// Runs the loop once in `mode`, returning after one source is handled or at `deadline`.
    ///
    /// Loop thread only. Returns false at once, without running, if `mode` has nothing to serve
    /// (or is `.common`); true otherwise.
    @discardableResult
    public func run(mode: Mode, until deadline: ContinuousClock.Instant) -> Bool {
        preconditionLoopThread("Loop.run(mode:until:)")
        collectPosts()
        guard mode != .common, !isFinished(mode) else { return false }
        runSpecific(mode, deadline: RunDeadline(at: deadline), returnAfterSourceHandled: true)
        return true
    }

    /// Step 1 and step 3 of a run: empty mode check, `entry`, the iterations, `exit`.
    @discardableResult
    func runSpecific(_ mode: Mode, deadline: RunDeadline, returnAfterSourceHandled: Bool) -> RunResult {
        // 1. A missing or empty mode (observers do not count) returns at once, with no callouts.
        collectPosts()
        guard mode != .common, !isFinished(mode) else { return .finished }
        let backend = ensureBackend()
        refreshInstruments()
        let frame = RunFrame(mode: mode)
        state.withLock { $0.runStack.append(frame) }
        // Sources signalled while another mode ran may be in this one: scan them once.
        sourceSignalled.store(true, ordering: .releasing)
        portSignalled.store(true, ordering: .releasing)

        // 2. entry, then iterate until a result. An entry observer that stopped the run ends it
        // before the first pass, as CFRunLoop does.
        notify(.entry, in: mode)
        var result: RunResult? = frame.stopped.load(ordering: .acquiring) ? .stopped : nil
        while result == nil {
            // Each pass numbered and between its hooks (`Loop+Hooks.swift`).
            let outerPass = beginPass()
            result = runOnce(mode, frame: frame, deadline: deadline, backend: backend, returnAfterSourceHandled)
            endPass(resuming: outerPass)
        }

        // 3. exit, and restore the outer run's mode.
        notify(.exit, in: mode)
        state.withLock { _ = $0.runStack.popLast() }
        sourceSignalled.store(true, ordering: .releasing)
        portSignalled.store(true, ordering: .releasing)
        return result!
    }

    /// One iteration (step 2.1 to 2.7). Returns nil to go round again. Inlined into its one
    /// caller, as it was while a closure wrapped it: a pass is short, and a call of its own is one
    /// more call, with its arguments spilled around it, per pass.
    @inline(__always)
    private func runOnce(
        _ mode: Mode, frame: RunFrame, deadline: RunDeadline, backend: LibeventBackend,
        _ returnAfterSourceHandled: Bool
    ) -> RunResult? {
        refreshInstruments()
        instrumentIteration(mode)

        // 2.1 beforeTimers, beforeSources.
        notify(.beforeTimers, in: mode)
        notify(.beforeSources, in: mode)

        // 2.2 Pending blocks for this mode; 2.3 signalled custom sources (ports come in 2.5).
        runBlocks(in: mode)
        var handledSource = performSources(in: mode, ports: false, onlyOne: returnAfterSourceHandled)
        if handledSource { runBlocks(in: mode) }

        // 2.4 Poll, and sleep if nothing is ready and nothing is owed.
        let events = waitForEvents(
            in: mode, frame: frame, deadline: deadline, backend: backend, mayWait: !handledSource)

        // 2.5 Due timers in fire-date order (due scheduled blocks join the pending blocks, for
        // 2.6), then every ready descriptor (not one per wake-up), then the ports with messages,
        // then the main queue.
        fireTimers(in: mode)
        takeDueScheduledBlocks()
        if !events.ready.isEmpty, serveDescriptors(events.ready, in: mode) { handledSource = true }
        if performSources(in: mode, ports: true, onlyOne: false) { handledSource = true }
        if events.mainQueueReady {
            onThread.mainQueuePending = true
            onThread.mainQueueInUse = true
        }
        if drainMainQueue(in: mode) { handledSource = true }

        // 2.6 Blocks again.
        runBlocks(in: mode)

        // 2.7 The result, in CFRunLoop's order.
        if handledSource && returnAfterSourceHandled { return .handledSource }
        if deadline.ticks != nil && deadline.hasPassed(TickClock.now) { return .timedOut }
        if frame.stopped.load(ordering: .acquiring) { return .stopped }
        collectPosts()
        if isFinished(mode) { return .finished }
        return nil
    }

    /// Step 2.4: polls the backend without blocking if the kernel may know of something the loop
    /// does not (a watched descriptor or the main queue); then, if nothing is ready, `mayWait` and
    /// nothing is owed, `beforeWaiting`, a sleep, `afterWaiting`.
    private func waitForEvents(
        in mode: Mode, frame: RunFrame, deadline: RunDeadline, backend: LibeventBackend, mayWait: Bool
    ) -> BackendEvents {
        syncDescriptors(for: mode, backend)
        var events = backend.hasPollableEvents ? backend.pollNow() : BackendEvents()
        if mayWait, !deadline.pollOnly, events.isEmpty, readyToSleep(in: mode, frame, deadline) {
            notify(.beforeWaiting, in: mode)
            // A beforeWaiting observer may have queued work or stopped the run: do not sleep on it.
            if readyToSleep(in: mode, frame, deadline) {
                // The poll's result (empty) shares the backend's ready array, which the wait
                // refills in place: let go of it first, or the refill copies the array (an
                // allocation per sleep: docs/performance-notes.md#the-iterations-own-costs).
                events = BackendEvents()
                events = sleep(in: mode, deadline: deadline, backend: backend)
            }
            notify(.afterWaiting, in: mode)
        }
        if events.woken { collectPosts(consumedWakeUp: true) }
        return events
    }

    /// Calls the `beforeSleeping` hooks, collects what other threads posted (reading away a
    /// wake-up written only to announce it), then says whether nothing keeps the loop from
    /// sleeping.
    private func readyToSleep(in mode: Mode, _ frame: RunFrame, _ deadline: RunDeadline) -> Bool {
        callHooksBeforeSleeping()
        inbox.prepareToSleep(into: onThread.pendingBlocks)
        return !hasWorkBeforeSleeping(mode, frame, deadline)
    }

    /// Sleeps in the kernel until an event, the mode's next timer, the next scheduled block or the
    /// deadline, after polling in user space first if recent waits were short (`Loop+Spin.swift`).
    private func sleep(in mode: Mode, deadline: RunDeadline, backend: LibeventBackend) -> BackendEvents {
        syncDescriptors(for: mode, backend)
        let wake = earliest(earliest(withView(of: mode) { $0.nextWake }, deadline.ticks), scheduledWakeTime)
        instrumentWait(true)
        defer { instrumentWait(false) }
        let spins = maySpin(backend)
        let waitStart = spins ? TickClock.now : 0
        let spin = spins ? spinBeforeSleeping(until: wake, startedAt: waitStart) : .sleep
        var events = BackendEvents()
        if spin == .sleep || spin == .expired {
            events = inbox.sleeping { backend.wait(until: wake) }
        }
        if spins {
            recordWait(from: waitStart, to: TickClock.now, woken: spin == .woken || events.woken)
        }
        return events
    }

    /// Whether the loop must not sleep: a stop, a signalled source, an instrument attached or
    /// detached, a runnable block, a due timer or scheduled block, a passed deadline, or a mode
    /// left empty (its last block ran): step 2.7 then returns at once instead of sleeping until the
    /// timeout on a mode nothing can wake. Reads only; posts are collected by the caller.
    private func hasWorkBeforeSleeping(_ mode: Mode, _ frame: RunFrame, _ deadline: RunDeadline) -> Bool {
        if frame.stopped.load(ordering: .acquiring) || sourceSignalled.load(ordering: .acquiring) { return true }
        // An instrument attached or detached from another thread: pick it up (step 2.1) first.
        if instrumentsChanged.load(ordering: .acquiring) { return true }
        // Ports are served after the sleep (step 2.5): one of this mode with messages waiting
        // means no sleep; the flag alone may stand for another mode's port.
        if portSignalled.load(ordering: .acquiring),
            withView(
                of: mode, walking: true,
                { $0.sources.contains(where: { $0?.isPort == true && $0?.pendingSignal != nil }) })
        {
            return true
        }
        if hasPendingBlocks(for: mode) { return true }
        if onThread.mainQueuePending && mayDrainMainQueue(in: mode) { return true }
        let (nextFireDate, hasSourcesOrTimers, isCommon) = withView(of: mode) {
            ($0.nextFireDate, $0.hasSourcesOrTimers, $0.isCommon)
        }
        // The clock is read only if there is a deadline, a timer or a scheduled block to compare with.
        if deadline.ticks != nil || nextFireDate != nil || scheduledWakeTime != nil {
            let now = TickClock.now
            if deadline.hasPassed(now) { return true }
            if let due = nextFireDate, due <= now { return true }
            if hasDueScheduledBlock(now: now) { return true }
        }
        // A mode left empty: step 2.7 returns at once instead of sleeping. The same test as
        // `isFinished`'s: where the two disagreed, the main loop polled without sleeping.
        if hasSourcesOrTimers || hasScheduledBlocks(for: mode, isCommon: isCommon) { return false }
        return !servesMainQueue(isCommon: isCommon)
    }

    /// Whether `mode` has nothing to serve: no sources, timers, collected blocks or scheduled
    /// blocks that may run in it, and (main loop, common mode) a main queue that has never had
    /// work. Reads only (call `collectPosts()` first for posts not yet seen).
    func isFinished(_ mode: Mode) -> Bool {
        if mode == .common { return true }
        let (isCommon, hasSourcesOrTimers) = withView(of: mode) { ($0.isCommon, $0.hasSourcesOrTimers) }
        if hasSourcesOrTimers { return false }
        if hasPendingBlocks(for: mode) || hasScheduledBlocks(for: mode, isCommon: isCommon) { return false }
        return !servesMainQueue(isCommon: isCommon)
    }

    func ensureBackend() -> LibeventBackend {
        if let backend { return backend }
        do {
            return try startBackend()
        } catch {
            Loop.cannotCreate(error)
        }
    }

    /// Creates the event backend (libevent's base with its epoll and signal pipe, and the loop's
    /// timerfd) on the loop's thread, where every libevent call stays. Throws a `LoopError` with `systemError` set,
    /// having closed what it opened.
    func startBackend() throws(LoopError) -> LibeventBackend {
        // libevent's base opens an epoll descriptor and a pipe for signals, and exits the process
        // when it cannot open the pipe: room for those three is checked first. (Another thread may
        // take the room in between; a process that has run out of descriptors is told here.)
        try Platform.checkDescriptorsFree(3)
        let backend = try LibeventBackend(wakeDescriptor: inbox.descriptor)
        if isMainLoop {
            try backend.watchMainQueue()
            // Work queued before the backend watched the queue left its eventfd readable: the
            // first poll sees it.
        }
        self.backend = backend
        return backend
    }

    private func earliest(_ a: Ticks?, _ b: Ticks?) -> Ticks? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }

    // MARK: Observers

    /// Calls the observers of `mode` that watch `activity`, in order.
    func notify(_ activity: Activity, in mode: Mode) {
        instrumentPhase(activity, mode)
        guard withView(of: mode, { $0.observerMask.contains(activity) }) else { return }
        // Held for the callouts: one may change the tables, which replaces the kept view. The
        // view's array is immutable and keeps its observers alive while the view is held, so
        // they are called without a reference count each (docs/performance-notes.md#the-iterations-own-costs).
        let view = view(of: mode, walking: true)
        withExtendedLifetime(view) {
            view.observers.withUnsafeBufferPointer { observers in
                for index in observers.indices {
                    // A hole is an observer that left the mode. Made straight from the borrowed
                    // element: binding the observer first (`guard let`) copies it, a retain and a
                    // release per callout (docs/performance-notes.md#the-iterations-own-costs).
                    guard let observer = observers[index].observer.map(Unmanaged.passUnretained) else { continue }
                    guard observer._withUnsafeGuaranteedRef({ $0.activities.contains(activity) }) else { continue }
                    callOut(.observer) { observer._withUnsafeGuaranteedRef { $0.callOut(activity) } }
                }
            }
        }
    }

    // MARK: Sources

    /// Performs the signalled custom sources of `mode` (`ports`: the ports' sources) by order, then
    /// signal time; `onlyOne`: the first of them only, as CFRunLoop does for a run that returns
    /// after a source (the others stay signalled for the next run). Returns whether any ran.
    private func performSources(in mode: Mode, ports: Bool, onlyOne: Bool) -> Bool {
        let wasSignalled =
            ports
            ? portSignalled.exchange(false, ordering: .acquiringAndReleasing)
            : sourceSignalled.exchange(false, ordering: .acquiringAndReleasing)
        guard wasSignalled else { return false }
        // The usual case, one signalled source, needs no list: it is found in the view's array
        // (no lock, no reference count) and performed, without the scratch array, its sort and
        // its emptying (docs/performance-notes.md#the-iterations-own-costs).
        var single: LoopSource?
        var several = false
        withView(of: mode, walking: true) { view in
            for case let source? in view.sources where source.isPort == ports && source.pendingSignal != nil {
                guard single == nil else {
                    several = true
                    break
                }
                single = source
            }
        }
        guard let single else { return false }
        if !several {
            // Unsignalled just before the callout: a signal during it runs the source again.
            guard let perform = single.takeSignal() else { return false }
            callOut(.source, perform)
            return true
        }
        return performSignalledSources(in: mode, ports: ports, onlyOne: onlyOne)
    }

    /// `performSources` when several sources are signalled: by order, then signal time.
    private func performSignalledSources(in mode: Mode, ports: Bool, onlyOne: Bool) -> Bool {
        // A loop-thread scratch array (no allocation per pass).
        var signalled = onThread.signalledScratch
        onThread.signalledScratch = []
        defer {
            signalled.removeAll(keepingCapacity: true)
            onThread.signalledScratch = signalled
        }
        withView(of: mode, walking: true) { view in
            for case let source? in view.sources where source.isPort == ports {
                if let since = source.pendingSignal { signalled.append((source, since)) }
            }
        }
        signalled.sort { ($0.source.order, $0.since) < ($1.source.order, $1.since) }
        var handled = false
        for (source, _) in signalled {
            if handled && onlyOne {
                // Left signalled: the next run (or pass) scans the sources again.
                if ports {
                    portSignalled.store(true, ordering: .releasing)
                } else {
                    sourceSignalled.store(true, ordering: .releasing)
                }
                break
            }
            // Unsignalled just before the callout: a signal during it runs the source again.
            guard let perform = source.takeSignal() else { continue }
            callOut(.source, perform)
            handled = true
        }
        return handled
    }

    // MARK: Timers

    /// Fires every timer of `mode` whose fire date has passed, in fire-date order.
    ///
    /// Each is taken off the heap just before its callout, so a nested run in this mode inside a
    /// callout fires the due timers still waiting (the firing one is claimed: not re-entered).
    /// Entries pushed during this pass (a repeating timer rescheduled into the past by `.burst`)
    /// wait for the next pass.
    private func fireTimers(in mode: Mode) {
        // Nothing due: no lock (popping changes the tables, so the view is read afresh).
        guard let next = withView(of: mode, { $0.nextFireDate }) else { return }
        let now = TickClock.now
        guard next <= now else { return }
        let passStart = state.withLock { $0.nextSequence }
        var deferred: [(entry: TimerHeap.Entry, exact: Bool)] = []
        while let (timer, generation) = popDueTimer(in: mode, now: now, pushedBefore: passStart, deferring: &deferred) {
            guard let (handler, claimed) = timer.claim(generation: generation) else { continue }
            let calledAt = ContinuousClock.now
            callOut(.timer) { handler(timer) }
            if timer.didFire(claimed: claimed, calledAt: calledAt, now: .now) {
                timerDidReschedule(timer)
            }
        }
        guard !deferred.isEmpty else { return }
        withTables { state in
            guard state.hasItems(of: mode) else { return }
            state.withItems(of: mode) { items in
                for (entry, exact) in deferred { items.restore(entry, exact: exact) }
            }
        }
    }

    /// The next live due entry of `mode` pushed before `passStart`, taken off the heap; due entries
    /// pushed since go to `deferred`.
    private func popDueTimer(
        in mode: Mode, now: Ticks, pushedBefore passStart: UInt64,
        deferring deferred: inout [(entry: TimerHeap.Entry, exact: Bool)]
    ) -> (LoopTimer, UInt64)? {
        withTables { state in
            guard state.hasItems(of: mode) else { return nil }
            return state.withItems(of: mode) { items in
                while let (top, exact) = items.popFirstDue(at: now) {
                    if top.sequence <= passStart { return (top.timer, top.generation) }
                    deferred.append((top, exact))
                }
                return nil
            }
        }
    }
}

/// When a run times out. `pollOnly`: a zero timeout, one pass without sleeping.
struct RunDeadline {
    /// In ticks: the iteration compares it with the clock several times per pass, and
    /// `ContinuousClock.Instant` (a resilient type) costs witness-table calls per copy.
    var ticks: Ticks?
    var pollOnly: Bool

    init(after timeout: Duration?) {
        guard let timeout else {
            self.init(ticks: nil, pollOnly: false)
            return
        }
        let now = ContinuousClock.now
        if timeout <= .zero {
            self.init(ticks: TickClock.ticks(now), pollOnly: true)
        } else if timeout > .seconds(100 * 365 * 86_400) {
            self.init(ticks: nil, pollOnly: false)  // "forever"
        } else {
            self.init(ticks: TickClock.ticks(now + timeout), pollOnly: false)
        }
    }

    init(at deadline: ContinuousClock.Instant) {
        self.init(ticks: TickClock.ticks(deadline), pollOnly: deadline <= .now)
    }

    private init(ticks: Ticks?, pollOnly: Bool) {
        self.ticks = ticks
        self.pollOnly = pollOnly
    }

    func hasPassed(_ now: Ticks) -> Bool {
        guard let ticks else { return false }
        return now >= ticks
    }
}
