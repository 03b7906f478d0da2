import Glibc
import RunLoopKit
import Testing

// Code samples of the DocC article LoopsAndModes.md
// (Sources/RunLoopKit/RunLoopKit.docc/LoopsAndModes.md), run: these blocks appear here verbatim
// (indentation aside); DocumentationTests.swift and GuideSourceTests.swift hold its others. Tests
// of the same calls that the article no longer shows stay beside them. scripts/check-doc-
// snippets.py, run by `make docs`, fails when a block of the article is in none of the files its
// table names for it.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

// MARK: What a loop is, running a loop

private func whatALoopIs() {
    let loop = Loop.current  // this thread's loop, created now if needed
    let timer = LoopTimer(after: .seconds(1), repeating: .seconds(1)) { _ in print("tick") }
    loop.add(timer, forMode: .default)
    loop.run()  // serves the timer until stop() or until .default is empty
    timer.invalidate()
}

private func whyARunEnded() {
    let loop = Loop.current
    switch loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true) {
    case .handledSource: print("a source was handled")
    case .timedOut: print("five quiet seconds")
    case .stopped: print("someone called stop()")
    case .finished: print("nothing left to serve in .default")
    }

    // Run until a deadline; false means there was nothing to run.
    let deadline = ContinuousClock.now + .seconds(1)
    while ContinuousClock.now < deadline && loop.run(mode: .default, until: deadline) {}
}

// MARK: Phases and observers

private func everyPhase() {
    func name(_ activity: Loop.Activity) -> String {
        switch activity {
        case .entry: "entry: the loop is starting"
        case .beforeTimers: "beforeTimers: about to fire timers"
        case .beforeSources: "beforeSources: about to perform sources"
        case .beforeWaiting: "beforeWaiting: about to sleep"
        case .afterWaiting: "afterWaiting: woken up"
        case .exit: "exit: the run is over"
        default: "other"
        }
    }

    let observer = LoopObserver(activities: .allActivities) { _, activity in
        print(name(activity))
    }
    Loop.current.add(observer, forMode: .common)

    Loop.current.add(LoopTimer(after: .milliseconds(100)) { _ in }, forMode: .default)
    Loop.current.run(mode: .default, for: .seconds(1))
    observer.invalidate()
}

private func profilingHangs() {
    var wokeAt: ContinuousClock.Instant?
    let profiler = LoopObserver(activities: [.afterWaiting, .beforeWaiting]) { _, activity in
        if activity == .afterWaiting {
            wokeAt = .now
        } else if let start = wokeAt {
            let busy = start.duration(to: .now)
            if busy > .milliseconds(50) { print("the loop was busy for \(busy): a hang?") }
            wokeAt = nil
        }
    }
    Loop.current.add(profiler, forMode: .common)

    // Once the loop sleeps (a timer due at the start could fire before the first wake-up on a
    // loaded machine, and nothing would be measured), a callout that blocks it for 80 ms; a later
    // timer keeps the loop running until it has gone back to sleep after the stall.
    let loop = Loop.current
    loop.add(LoopTimer(after: .milliseconds(300)) { _ in }, forMode: .default)
    whenAsleep(loop) {
        loop.add(LoopTimer(after: .milliseconds(5)) { _ in usleep(80_000) }, forMode: .default)
    }
    loop.run(mode: .default, for: .seconds(1))
    profiler.invalidate()
}

private func deferringWork() {
    let loop = Loop.current
    var dirty: Set<String> = []  // filled by your handlers
    let flush = LoopObserver(
        activities: .beforeWaiting, order: 1_000,
        loop.isolated { _, _ in
            guard !dirty.isEmpty else { return }
            print("writing \(dirty.count) changed records in one batch")
            dirty.removeAll()
        })
    loop.add(flush, forMode: .common)

    // Two handlers of one wake-up (timers due at the same instant) change three records; a later
    // timer makes the loop sleep again. It is far enough (300 ms) that the first pass, however
    // late on a loaded machine, does not fire it too and leave the mode empty: the run would then
    // end without sleeping, and nothing would be flushed (seen with 50 ms).
    let due = ContinuousClock.now + .milliseconds(5)
    loop.add(LoopTimer(fireAt: due, loop.isolated { _ in dirty.formUnion(["a", "b"]) }), forMode: .default)
    loop.add(LoopTimer(fireAt: due, loop.isolated { _ in dirty.insert("c") }), forMode: .default)
    loop.add(LoopTimer(after: .milliseconds(300)) { _ in }, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    flush.invalidate()
}

private func autosaveOnIdle() {
    let loop = Loop.current
    let idle = Duration.seconds(1)
    var unsaved = false  // set by your handlers
    let autosave = LoopTimer(
        after: idle, repeating: idle,
        loop.isolated { _ in
            if unsaved {
                print("saving")
                unsaved = false
            }
        })
    loop.add(autosave, forMode: .default)
    let idleWatch = LoopObserver(activities: .beforeWaiting) { _, _ in
        autosave.fireDate = .now + idle  // re-arms the timer
    }
    loop.add(idleWatch, forMode: .default)

    // Four edits 200 ms apart: each wake-up pushes the autosave out, so it saves once, a second
    // after the last.
    var edits = 0
    let editor = LoopTimer(after: .milliseconds(200), repeating: .milliseconds(200)) { timer in
        print("edit")
        unsaved = true
        edits += 1
        if edits == 4 { timer.invalidate() }
    }
    loop.add(editor, forMode: .default)
    // One long run: a run that ends makes the loop wake up too.
    once({ printed.events.contains("saving") }, then: { loop.stop() })
    loop.run(mode: .default, for: .seconds(10))
    autosave.invalidate()
    idleWatch.invalidate()
}

private func cleanupOnExit() {
    let worker = LoopThread(name: "db")
    let cleanup = LoopObserver(activities: .exit, repeats: false) { _, _ in
        print("closing the database connection on the worker thread")
    }
    worker.loop.add(cleanup, forMode: .common)
    // ...
    worker.shutdown()  // the worker's run exits: cleanup runs, then the thread ends
}

// MARK: Modes

/// What the modes snippets printed, block by block.
private struct ModesOutcome: Sendable {
    var whileFrozen: [String] = []
    var whileTracking: [String] = []
    var commonModes = ""
    var whileImporting: [String] = []
    var afterRemoving: [String] = []
    var frozenStillInDefault = true
}

private func modes() -> ModesOutcome {
    var outcome = ModesOutcome()
    let loop = Loop.current

    let frozen = LoopTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { _ in
        print("default-mode timer")
    }
    loop.add(frozen, forMode: .default)

    loop.run(mode: .tracking, for: .seconds(1))  // "default-mode timer" never prints
    outcome.whileFrozen = printed.events
    printed.removeAll()

    let ticking = LoopTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { _ in
        print("common-mode timer")
    }
    loop.add(ticking, forMode: .common)

    loop.run(mode: .tracking, for: .seconds(1))  // prints about ten times
    outcome.whileTracking = printed.events
    printed.removeAll()

    let importing = Loop.Mode("import")
    loop.addCommonMode(importing)
    print(loop.commonModes)  // now also contains "import"
    loop.run(mode: importing, for: .seconds(1))  // serves the .common items, not .default-only ones
    outcome.commonModes = printed.events.first ?? ""
    outcome.whileImporting = Array(printed.events.dropFirst())
    printed.removeAll()

    loop.remove(frozen, forMode: .default)
    print(loop.contains(ticking, inMode: .common))  // true
    outcome.afterRemoving = printed.events
    outcome.frozenStillInDefault = loop.contains(frozen, inMode: .default)
    ticking.invalidate()
    return outcome
}

// MARK: Stopping, nested runs

private func stopFromAnotherThread() {
    let loop = Loop.current
    let stopper = LoopThread(name: "stopper")
    let stopLater = LoopTimer(after: .seconds(1)) { _ in loop.stop() }  // runs on "stopper"
    stopper.loop.add(stopLater, forMode: .default)
    let heartbeat = LoopTimer(after: .milliseconds(200), repeating: .milliseconds(200)) { _ in print("alive") }
    loop.add(heartbeat, forMode: .default)
    loop.run()  // returns after about a second
    stopper.shutdown()
    heartbeat.invalidate()
}

private func nestedRun() {
    let loop = Loop.current
    let modal = Loop.Mode("modal")
    var answered = false
    let answer = LoopTimer(after: .milliseconds(300), loop.isolated { _ in answered = true })
    loop.add(answer, forMode: modal)

    let ask = LoopTimer(after: .milliseconds(100)) { _ in
        print("outer mode: \(loop.currentMode!.name)")  // default
        while !answered {
            loop.run(mode: modal, for: .seconds(1))  // serves only the modal mode
        }
        print("back in \(loop.currentMode!.name)")  // default
    }
    loop.add(ask, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
}

// MARK: Tests

/// The chapters' code does what the chapters say. Serialized: the snippets share `printed`.
@Suite(.serialized) struct GuideLoopTests {
    init() { printed.removeAll() }

    @Test func runServesTheTimerUntilStop() async {
        await awaitFreshThread {
            let loop = Loop.current
            once({ printed.count >= 1 }, then: { loop.stop() })
            whatALoopIs()
        }
        #expect(printed.events == ["tick"])
    }

    @Test func aRunSaysWhyItEnded() async {
        // Nothing in .default: finished at once, and the deadline loop does not run.
        var elapsed = await awaitFreshThread {
            let start = ContinuousClock.now
            whyARunEnded()
            return ContinuousClock.now - start
        }
        #expect(printed.events == ["nothing left to serve in .default"])
        #expect(elapsed < .milliseconds(900))

        // A source that goes once performed: handled, then nothing left again.
        printed.removeAll()
        await awaitFreshThread {
            var source: LoopSource?
            source = LoopSource(Loop.current.isolated { source?.invalidate() })
            source?.signal()
            Loop.current.add(source!, forMode: .default)
            whyARunEnded()
        }
        #expect(printed.events == ["a source was handled"])

        // stop() from another thread; the source keeps .default alive, so the deadline loop runs
        // until the deadline.
        printed.removeAll()
        elapsed = await awaitFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            whenAsleep(loop) { loop.stop() }
            let start = ContinuousClock.now
            whyARunEnded()
            keepAlive.invalidate()
            return ContinuousClock.now - start
        }
        #expect(printed.events == ["someone called stop()"])
        #expect(elapsed >= .seconds(1))
    }

    @Test func theDebuggingObserverPrintsEveryPhase() async {
        await awaitFreshThread { everyPhase() }
        #expect(
            printed.events == [
                "entry: the loop is starting",
                "beforeTimers: about to fire timers",
                "beforeSources: about to perform sources",
                "beforeWaiting: about to sleep",
                "afterWaiting: woken up",
                "exit: the run is over",
            ])
    }

    @Test func theProfilerReportsABusyLoop() async {
        await awaitFreshThread { profilingHangs() }
        // The 80 ms stall; a loaded machine may stall the thread once more on its own.
        #expect((1...2).contains(printed.count), "\(printed.events)")
        #expect(printed.events.allSatisfy { $0.hasPrefix("the loop was busy for ") && $0.hasSuffix(": a hang?") })
    }

    @Test func workDeferredToBeforeWaitingRunsOncePerWakeUp() async {
        await awaitFreshThread { deferringWork() }
        #expect(printed.events == ["writing 3 changed records in one batch"])
    }

    @Test func autosaveWaitsForAnIdleLoop() async {
        await awaitFreshThread { autosaveOnIdle() }
        #expect(printed.events == ["edit", "edit", "edit", "edit", "saving"])
    }

    @Test func theExitObserverRunsWhenTheWorkerStops() async {
        await awaitFreshThread { cleanupOnExit() }
        #expect(printed.events == ["closing the database connection on the worker thread"])
    }

    @Test func modesHoldTheirItems() async {
        let outcome = await awaitFreshThread { modes() }
        #expect(outcome.whileFrozen.isEmpty)
        #expect(outcome.whileTracking.allSatisfy { $0 == "common-mode timer" })
        #expect((5...11).contains(outcome.whileTracking.count))
        #expect(outcome.commonModes.contains("import"))
        #expect(outcome.whileImporting.allSatisfy { $0 == "common-mode timer" })
        #expect((5...11).contains(outcome.whileImporting.count))
        #expect(outcome.afterRemoving == ["true"])
        #expect(!outcome.frozenStillInDefault)
    }

    @Test func stopFromAnotherThreadEndsRun() async {
        let elapsed = await awaitFreshThread {
            let start = ContinuousClock.now
            stopFromAnotherThread()
            return ContinuousClock.now - start
        }
        #expect(elapsed >= .seconds(1))
        #expect(printed.events.allSatisfy { $0 == "alive" })
        #expect((1...5).contains(printed.count))
    }

    @Test func aNestedRunReturnsToTheOuterMode() async {
        await awaitFreshThread { nestedRun() }
        #expect(printed.events == ["outer mode: default", "back in default"])
    }
}
