import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// `stop()`, `wakeUp()`, `run()`, `run(mode:until:)` and nested runs (a per-run stack of modes and
/// stop flags).
@Suite struct StopAndNestedRunTests {
    @Test func stopFromAnotherThreadEndsARunPromptly() {
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            whenAsleep(loop) { loop.stop() }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5))
            return (result, ContinuousClock.now - start)
        }
        #expect(result == .stopped)
        #expect(elapsed < .milliseconds(500))
    }

    @Test func stopFromAnotherThreadEndsRun() {
        let safetyNetFired = Recorder<Int>()
        let elapsed = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            // If stop() were lost, this empties .default after 5 s so that run() still returns.
            let safetyNet = LoopTimer(after: .seconds(5)) { _ in
                safetyNetFired.append(1)
                keepAlive.invalidate()
            }
            loop.add(safetyNet, forMode: .default)
            whenAsleep(loop) { loop.stop() }
            let start = ContinuousClock.now
            loop.run()
            return ContinuousClock.now - start
        }
        #expect(safetyNetFired.count == 0)
        #expect(elapsed < .milliseconds(500))
    }

    @Test(arguments: [false, true])
    func stopWhileNotRunningIsForgotten(fromAnotherThread: Bool) {
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            if fromAnotherThread {
                onFreshThread { loop.stop() }
            } else {
                loop.stop()
            }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .milliseconds(30))
            return (result, ContinuousClock.now - start)
        }
        #expect(result == .timedOut)
        #expect(elapsed >= .milliseconds(30))
    }

    /// `stop()` from an `entry` observer ends the run before its first pass (as CFRunLoop): no
    /// `beforeTimers`, no block, no source; `exit` is still called.
    @Test func stopFromAnEntryObserverEndsTheRunBeforeAnyPass() {
        let activities = Recorder<String>()
        let result = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { activities.append("source") }
            loop.add(source, forMode: .default)
            source.signal()
            loop.perform(inModes: [.default]) { activities.append("block") }
            let observer = LoopObserver(activities: .allActivities) { _, activity in
                activities.append("\(activity)")
                if activity == .entry { Loop.current.stop() }
            }
            loop.add(observer, forMode: .default)
            return loop.run(mode: .default, for: .seconds(5))
        }
        #expect(result == .stopped)
        #expect(activities.events == ["\(Loop.Activity.entry)", "\(Loop.Activity.exit)"])
    }

    @Test func wakeUpEndsASleepWithoutHandlingAnything() {
        let wokenAt = Recorder<ContinuousClock.Instant>()
        let wakeUpCalledAt = Locked<ContinuousClock.Instant?>(nil)
        let performed = Recorder<Int>()
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource { performed.append(1) }, forMode: .default)
            let observer = LoopObserver(activities: .afterWaiting) { _, _ in wokenAt.append(.now) }
            loop.add(observer, forMode: .default)
            whenAsleep(loop) {
                wakeUpCalledAt.withLock { $0 = .now }
                loop.wakeUp()
            }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .milliseconds(300), returnAfterSourceHandled: true)
            return (result, ContinuousClock.now - start)
        }
        // Nothing was handled: the run goes back to sleep and ends at its timeout.
        #expect(result == .timedOut)
        #expect(elapsed >= .milliseconds(300))
        #expect(performed.count == 0)
        let wakes = wokenAt.events
        #expect(wakes.count >= 2, "one wake-up for wakeUp(), one at the timeout")
        let calledAt = wakeUpCalledAt.withLock { $0 }
        #expect(calledAt != nil)
        if let calledAt, let firstWake = wakes.first {
            #expect(firstWake >= calledAt)
            #expect(firstWake - calledAt < .milliseconds(50))
        }
    }

    @Test func nestedRunsInTheSameModeAndAnotherMode() {
        let modes = Recorder<String>()
        let inner = Recorder<Loop.RunResult>()
        let (result, modeBefore, modeAfter) = onFreshThread {
            let loop = Loop.current
            @Sendable func record(_ label: String) { modes.append("\(label): \(loop.currentMode?.name ?? "nil")") }
            loop.add(LoopSource {}, forMode: .default)
            let other = LoopSource { record("source in other") }
            loop.add(other, forMode: "other")
            let timer = LoopTimer(after: .milliseconds(1)) { _ in
                record("timer")
                other.signal()
                inner.append(loop.run(mode: "other", for: .seconds(5), returnAfterSourceHandled: true))
                record("after other")
                loop.perform(inModes: [.default]) {
                    record("block in nested default")
                    Loop.current.stop()
                }
                inner.append(loop.run(mode: .default, for: .seconds(5)))
                record("after nested default")
                Loop.current.stop()
            }
            loop.add(timer, forMode: .default)
            let modeBefore = loop.currentMode
            let result = loop.run(mode: .default, for: .seconds(5))
            return (result, modeBefore, loop.currentMode)
        }
        #expect(result == .stopped)
        #expect(modeBefore == nil)
        #expect(modeAfter == nil)
        #expect(inner.events == [.handledSource, .stopped])
        #expect(
            modes.events == [
                "timer: default",
                "source in other: other",
                "after other: default",
                "block in nested default: default",
                "after nested default: default",
            ])
    }

    @Test(arguments: [Loop.Mode.default, "other"])
    func stopInsideANestedRunStopsOnlyTheInnermostRun(innerMode: Loop.Mode) {
        let events = Recorder<String>()
        let (outer, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            loop.add(LoopSource {}, forMode: "other")
            loop.perform(inModes: [.default]) {
                loop.perform(inModes: [innerMode]) {
                    events.append("stopping \(loop.currentMode?.name ?? "nil")")
                    loop.stop()
                }
                let inner = loop.run(mode: innerMode, for: .seconds(5))
                events.append("inner \(inner)")
            }
            let start = ContinuousClock.now
            let outer = loop.run(mode: .default, for: .milliseconds(200))
            return (outer, ContinuousClock.now - start)
        }
        #expect(events.events == ["stopping \(innerMode.name)", "inner stopped"])
        #expect(outer == .timedOut)
        #expect(elapsed >= .milliseconds(200))
    }

    @Test func nestedHundredDeep() {
        let depth = 100
        let results = Recorder<Loop.RunResult>()
        let restored = Recorder<Bool>()
        let deepest = Recorder<Int>()
        onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            StopAndNestedRunTests.descend(
                1, to: depth, loop: loop, keepAlive: keepAlive, results: results, restored: restored,
                deepest: deepest)
            keepAlive.invalidate()
        }
        #expect(deepest.events == [depth])
        #expect(results.events == Array(repeating: .stopped, count: depth))
        #expect(restored.events == Array(repeating: true, count: depth))
    }

    /// Runs mode `level<level>`; a block in it runs the next level, then stops its own run.
    private static func descend(
        _ level: Int, to depth: Int, loop: Loop, keepAlive: LoopSource, results: Recorder<Loop.RunResult>,
        restored: Recorder<Bool>, deepest: Recorder<Int>
    ) {
        let mode = Loop.Mode("level\(level)")
        loop.add(keepAlive, forMode: mode)
        loop.perform(inModes: [mode]) {
            if level < depth {
                descend(
                    level + 1, to: depth, loop: loop, keepAlive: keepAlive, results: results, restored: restored,
                    deepest: deepest)
            } else {
                deepest.append(level)
            }
            restored.append(loop.currentMode == mode)
            loop.stop()
        }
        results.append(loop.run(mode: mode, for: .seconds(5)))
    }

    @Test func runUntilReturnsFalseAtOnceOnAnEmptyMode() {
        let (ran, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: "other")
            let start = ContinuousClock.now
            let ran = loop.run(mode: .default, until: .now + .seconds(5))
            return (ran, ContinuousClock.now - start)
        }
        #expect(!ran)
        #expect(elapsed < .milliseconds(100))
    }

    @Test func runUntilReturnsTrueAfterHandlingASource() {
        let performed = Recorder<Int>()
        let (ran, elapsed) = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { performed.append(1) }
            loop.add(source, forMode: .default)
            whenAsleep(loop) { source.signal() }
            let start = ContinuousClock.now
            let ran = loop.run(mode: .default, until: .now + .seconds(5))
            return (ran, ContinuousClock.now - start)
        }
        #expect(ran)
        #expect(performed.count == 1)
        #expect(elapsed < .seconds(1))
    }

    @Test func runUntilReturnsTrueAtTheDeadline() {
        let (ran, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let start = ContinuousClock.now
            let ran = loop.run(mode: .default, until: start + .milliseconds(30))
            return (ran, ContinuousClock.now - start)
        }
        #expect(ran)
        #expect(elapsed >= .milliseconds(30))
        #expect(elapsed < .seconds(1))
    }

    @Test func runReturnsWhenDefaultBecomesEmpty() {
        let fired = Recorder<Int>()
        let exits = Recorder<Loop.Activity>()
        let elapsed = onFreshThread {
            let loop = Loop.current
            loop.add(LoopTimer(after: .milliseconds(10)) { _ in fired.append(1) }, forMode: .default)
            loop.add(LoopObserver(activities: .exit) { _, activity in exits.append(activity) }, forMode: .default)
            let start = ContinuousClock.now
            loop.run()
            return ContinuousClock.now - start
        }
        #expect(fired.count == 1)
        #expect(exits.count == 1)
        #expect(elapsed < .seconds(1))
    }

    @Test func runReturnsWhenStoppedFromACallout() {
        let fired = Recorder<Int>()
        let elapsed = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let timer = LoopTimer(after: .milliseconds(5), repeating: .milliseconds(5)) { _ in
                fired.append(1)
                if fired.count == 3 { Loop.current.stop() }
            }
            loop.add(timer, forMode: .default)
            let start = ContinuousClock.now
            loop.run()
            timer.invalidate()
            return ContinuousClock.now - start
        }
        #expect(fired.count == 3)
        #expect(elapsed < .seconds(1))
    }

    @Test func runningALoopFromAnotherThreadIsAProgrammerError() async {
        await #expect(processExitsWith: .failure) {
            let owner = LoopThread(name: "owner")
            owner.loop.run(mode: .default, for: .milliseconds(10))
        }
        await #expect(processExitsWith: .failure) {
            let owner = LoopThread(name: "owner")
            owner.loop.run()
        }
        await #expect(processExitsWith: .failure) {
            let owner = LoopThread(name: "owner")
            owner.loop.run(mode: .default, until: .now + .milliseconds(10))
        }
    }
}
