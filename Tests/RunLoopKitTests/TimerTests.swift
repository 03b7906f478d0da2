import Foundation
import Testing

@testable import RunLoopKit

/// Timers: one-shot and repeating fires, precision, tolerance and coalescing, missed fires,
/// re-arming, invalidation, `fire()`, and the one-loop rule.
@Suite struct TimerTests {
    typealias Instant = ContinuousClock.Instant

    /// Where a re-armed fire date lies relative to the original one.
    enum Shift: String, CaseIterable, Sendable {
        case earlier, later
    }

    // MARK: Firing

    @Test func oneShotFiresOnceAndBecomesInvalid() {
        let (result, fires, valid, contained) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            let timer = LoopTimer(after: .milliseconds(5), loop.isolated { _ in fires += 1 })
            loop.add(timer, forMode: .default)
            loop.add(LoopSource {}, forMode: .default)  // keeps the mode alive after the fire
            let result = loop.run(mode: .default, for: .milliseconds(60))
            return (result, fires, timer.isValid, loop.contains(timer, inMode: .default))
        }
        #expect(result == .timedOut)
        #expect(fires == 1)
        #expect(!valid)
        #expect(!contained)
    }

    @Test func repeatingFiresAtItsInterval() {
        let interval = Duration.milliseconds(10)
        let (start, fires, result) = onFreshThread {
            let loop = Loop.current
            let start = ContinuousClock.now
            var fires: [(date: Instant, at: Instant)] = []
            let timer = LoopTimer(
                fireAt: start + interval, interval: interval,
                loop.isolated { timer in
                    fires.append((timer.fireDate, .now))
                    if fires.count == 5 { timer.invalidate() }
                })
            loop.add(timer, forMode: .default)
            let result = loop.run(mode: .default, for: .seconds(5))
            return (start, fires, result)
        }
        #expect(result == .finished)
        // On the grid, in order: the first fire at start + interval; on a loaded machine a later one
        // may be missed (collapsed into the next, keeping the phase), never moved off the grid.
        #expect(fires.first?.date == start + interval)
        for (earlier, later) in zip(fires, fires.dropFirst()) {
            let step = later.date - earlier.date
            #expect(step >= interval && step == interval * Int((step / interval).rounded()))
        }
        for fire in fires {
            #expect(fire.at >= fire.date)
            #expect(fire.at - fire.date < .milliseconds(50))
        }
    }

    @Test(arguments: [Duration.zero, .milliseconds(5)])
    func neverFiresBeforeItsFireDate(tolerance: Duration) {
        let lateness: [Duration] = onFreshThread {
            let loop = Loop.current
            var lateness: [Duration] = []
            for delay in 1...20 {
                let timer = LoopTimer(
                    after: .microseconds(700 * delay), tolerance: tolerance,
                    loop.isolated { timer in
                        lateness.append(.now - timer.fireDate)
                    })
                loop.add(timer, forMode: .default)
            }
            loop.run(mode: .default, for: .seconds(5))
            return lateness
        }
        #expect(lateness.count == 20)
        #expect(lateness.allSatisfy { $0 >= .zero })
        #expect(lateness.allSatisfy { $0 < tolerance + .milliseconds(250) })
    }

    /// Never early, and prompt on an idle loop. Precision itself is measured by `runloop-bench`
    /// (timer lateness); the bounds here hold on a loaded machine and still catch a coarse clock
    /// or a missed re-arm (which would be late by a whole second, the run's timeout).
    @Test func firesNeverEarlyAndPromptlyOnAnIdleLoop() throws {
        let lateness: [Duration] = onFreshThread {
            let loop = Loop.current
            var lateness: [Duration] = []
            for _ in 0..<21 {
                let timer = LoopTimer(
                    after: .milliseconds(3), loop.isolated { timer in lateness.append(.now - timer.fireDate) })
                loop.add(timer, forMode: .default)
                loop.run(mode: .default, for: .seconds(1))
            }
            return lateness.sorted()
        }
        try #require(lateness.count == 21)
        #expect(lateness.allSatisfy { $0 >= .zero })
        #expect(lateness[10] < .milliseconds(20), "median lateness \(lateness[10])")
        #expect(lateness[20] < .milliseconds(200), "max lateness \(lateness[20])")
    }

    /// The loop's clock reads the time `ContinuousClock.now` does, in nanoseconds since the same
    /// epoch: a read between two instants lies between their ticks (a different clock, unit or
    /// epoch would put it outside, and a fire date compared with it would fire early or late).
    @Test func theLoopClockReadsContinuousClockTime() {
        for _ in 0..<1_000 {
            let before = ContinuousClock.now
            let ticks = TickClock.now
            let after = ContinuousClock.now
            guard TickClock.ticks(before) <= ticks, ticks <= TickClock.ticks(after) else {
                Issue.record("ticks \(ticks) outside \(TickClock.ticks(before))...\(TickClock.ticks(after))")
                return
            }
        }
        let instant = ContinuousClock.now
        #expect(TickClock.instant(TickClock.ticks(instant)) == instant)
        #expect(TickClock.ticks(TickClock.origin) == 0)
    }

    // MARK: Tolerance

    @Test(arguments: [Duration.milliseconds(2), .milliseconds(10), .milliseconds(30)])
    func toleranceIsHonoured(tolerance: Duration) {
        let (date, firedAt) = onFreshThread {
            let loop = Loop.current
            var fire: (date: Instant, at: Instant)?
            let timer = LoopTimer(
                after: .milliseconds(20), tolerance: tolerance,
                loop.isolated { timer in
                    fire = (timer.fireDate, .now)
                })
            loop.add(timer, forMode: .default)
            loop.run(mode: .default, for: .seconds(5))
            return fire ?? (.now, .now - .seconds(1000))
        }
        #expect(firedAt >= date)
        // Generous: a loaded machine may wake the thread late whatever the tolerance.
        #expect(firedAt <= date + tolerance + .milliseconds(50))
    }

    @Test func tolerantTimerCoalescesWithALaterOne() {
        let (start, events, aFiredAt, bDate, result) = onFreshThread {
            let loop = Loop.current
            let start = ContinuousClock.now
            var events: [String] = []
            var aFiredAt = start
            let sleeps = LoopObserver(
                activities: [.beforeWaiting, .afterWaiting],
                loop.isolated { _, activity in
                    events.append(activity == .beforeWaiting ? "sleep" : "wake")
                })
            let a = LoopTimer(
                fireAt: start + .milliseconds(50), tolerance: .milliseconds(30),
                loop.isolated { _ in
                    events.append("A")
                    aFiredAt = .now
                })
            let b = LoopTimer(fireAt: start + .milliseconds(70), loop.isolated { _ in events.append("B") })
            loop.add(sleeps, forMode: .default)
            loop.add(a, forMode: .default)
            loop.add(b, forMode: .default)
            let result = loop.run(mode: .default, for: .seconds(5))
            return (start, events, aFiredAt, b.fireDate, result)
        }
        #expect(result == .finished)
        // One sleep, one wake-up, both timers served after it.
        #expect(events == ["sleep", "wake", "A", "B"])
        #expect(aFiredAt >= bDate)
        #expect(aFiredAt - start < .milliseconds(80) + .milliseconds(50))
    }

    // MARK: Missed fires

    @Test func missedFiresCollapseAndKeepThePhase() throws {
        let interval = Duration.milliseconds(10)
        let (start, unblocked, fires, iterations) = onFreshThread {
            let loop = Loop.current
            let start = ContinuousClock.now
            var unblocked = start
            var iterations: [Instant] = []
            let marker = LoopObserver(activities: .beforeTimers, loop.isolated { _, _ in iterations.append(.now) })
            loop.add(marker, forMode: .default)
            var fires: [(date: Instant, at: Instant)] = []
            let timer = LoopTimer(
                fireAt: start + interval, interval: interval,
                loop.isolated { timer in
                    fires.append((timer.fireDate, .now))
                    if fires.count == 3 { timer.invalidate() }
                })
            // A callout that keeps the loop busy for 55 ms: the repeating timer misses five fires.
            let blocker = LoopTimer(
                fireAt: start,
                loop.isolated { _ in
                    usleep(55_000)
                    unblocked = .now
                })
            loop.add(timer, forMode: .default)
            loop.add(blocker, forMode: .default)
            loop.run(mode: .default, for: .seconds(5))
            return (start, unblocked, fires, iterations)
        }
        try #require(fires.count == 3)
        #expect(unblocked - start >= .milliseconds(55))
        // The late fire: once, for the original fire date, after the loop unblocked.
        #expect(fires[0].date == start + interval)
        #expect(fires[0].at >= unblocked)
        // The next fire date is on the original grid: the first start + k·interval after the late fire.
        let k = Int(((fires[1].date - start) / interval).rounded())
        #expect(fires[1].date == start + interval * k)
        #expect(k >= 6)
        // It was computed after the late callout and before the next iteration began, so it lies
        // after the former and its grid predecessor at or before the latter.
        let nextIteration = try #require(iterations.first { $0 > fires[0].at })
        #expect(fires[1].date > fires[0].at)
        #expect(fires[1].date - interval <= nextIteration)
        #expect(fires[2].date == fires[1].date + interval)
    }

    // MARK: Re-arming

    @Test(arguments: Shift.allCases, [false, true])
    func settingFireDateRearms(shift: Shift, fromAnotherThread: Bool) throws {
        let original: Duration = shift == .earlier ? .seconds(1) : .milliseconds(60)
        let newDelay: Duration = shift == .earlier ? .milliseconds(30) : .milliseconds(150)
        let newDates = Recorder<Instant>()
        let (fires, result) = onFreshThread {
            let loop = Loop.current
            var fires: [(date: Instant, at: Instant)] = []
            let timer = LoopTimer(after: original, loop.isolated { timer in fires.append((timer.fireDate, .now)) })
            loop.add(timer, forMode: .default)
            let rearm: @Sendable () -> Void = {
                let date = ContinuousClock.now + newDelay
                newDates.append(date)
                timer.fireDate = date
            }
            if fromAnotherThread {
                whenAsleep(loop, rearm)
            } else {
                loop.add(LoopTimer(after: .milliseconds(5)) { _ in rearm() }, forMode: .default)
            }
            let result = loop.run(mode: .default, for: .seconds(5))
            return (fires, result)
        }
        #expect(result == .finished)
        try #require(newDates.count == 1 && fires.count == 1)
        let newDate = newDates.events[0]
        #expect(fires[0].date == newDate)
        #expect(fires[0].at >= newDate)
        #expect(fires[0].at - newDate < .milliseconds(50))
    }

    // MARK: Invalidation

    @Test func invalidateFromInsideTheHandlerStopsARepeatingTimer() {
        let (fires, result, valid, contained) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            let timer = LoopTimer(
                after: .milliseconds(5), repeating: .milliseconds(5),
                loop.isolated { timer in
                    fires += 1
                    if fires == 3 { timer.invalidate() }
                })
            loop.add(timer, forMode: .default)
            loop.add(LoopSource {}, forMode: .default)  // the loop keeps running after the invalidation
            let result = loop.run(mode: .default, for: .milliseconds(80))
            return (fires, result, timer.isValid, loop.contains(timer, inMode: .default))
        }
        #expect(result == .timedOut)
        #expect(fires == 3)
        #expect(!valid)
        #expect(!contained)
    }

    @Test func invalidateFromAnotherThreadWhileTheLoopSleeps() {
        let (fires, result, elapsed) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            let timer = LoopTimer(after: .seconds(2), loop.isolated { _ in fires += 1 })
            loop.add(timer, forMode: .default)
            whenAsleep(loop) { timer.invalidate() }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(3))
            return (fires, result, ContinuousClock.now - start)
        }
        #expect(fires == 0)
        // The timer was the mode's only item: the loop wakes and finds the mode empty.
        #expect(result == .finished)
        #expect(elapsed < .milliseconds(500))
    }

    // MARK: fire()

    @Test func fireCallsTheHandlerAndInvalidatesAOneShot() {
        let (firesAfterFire, valid, contained, result, fires) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            let timer = LoopTimer(after: .milliseconds(20), loop.isolated { _ in fires += 1 })
            loop.add(timer, forMode: .default)
            timer.fire()
            let firesAfterFire = fires
            let valid = timer.isValid
            let contained = loop.contains(timer, inMode: .default)
            let result = loop.run(mode: .default, for: .milliseconds(100))
            return (firesAfterFire, valid, contained, result, fires)
        }
        #expect(firesAfterFire == 1)
        #expect(!valid)
        #expect(!contained)
        #expect(result == .finished)
        #expect(fires == 1)
    }

    @Test func fireLeavesARepeatingTimerScheduled() throws {
        let (firesAfterFire, valid, dateKept, fires, result) = onFreshThread {
            let loop = Loop.current
            var fires: [Instant] = []
            let timer = LoopTimer(
                after: .milliseconds(20), repeating: .milliseconds(20),
                loop.isolated { timer in
                    fires.append(timer.fireDate)
                    if fires.count == 3 { timer.invalidate() }
                })
            loop.add(timer, forMode: .default)
            let date = timer.fireDate
            timer.fire()
            let firesAfterFire = fires.count
            let valid = timer.isValid && loop.contains(timer, inMode: .default)
            let dateKept = timer.fireDate == date
            let result = loop.run(mode: .default, for: .seconds(5))
            return (firesAfterFire, valid, dateKept, fires, result)
        }
        #expect(firesAfterFire == 1)
        #expect(valid)
        #expect(dateKept)
        // The scheduled fires still happen, on the original schedule.
        #expect(result == .finished)
        try #require(fires.count == 3)
        // fires[0] is the manual fire, which saw the untouched first fire date; then the schedule.
        #expect(fires[1] == fires[0])
        #expect(fires[2] - fires[1] == .milliseconds(20))
    }

    // MARK: Construction

    @Test(arguments: [Duration.zero, .milliseconds(-10)])
    func nonPositiveIntervalMeansOneShot(interval: Duration) {
        let (hasInterval, fires, valid, result) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            let timer = LoopTimer(after: .milliseconds(2), repeating: interval, loop.isolated { _ in fires += 1 })
            loop.add(timer, forMode: .default)
            loop.add(LoopSource {}, forMode: .default)
            let result = loop.run(mode: .default, for: .milliseconds(50))
            return (timer.interval != nil, fires, timer.isValid, result)
        }
        #expect(!hasInterval)
        #expect(result == .timedOut)
        #expect(fires == 1)
        #expect(!valid)
    }

    @Test(arguments: [Duration.milliseconds(-1), .seconds(-10)])
    func negativeDelayFiresAtOnce(delay: Duration) {
        let (dateInPast, fires, result, elapsed) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            let timer = LoopTimer(after: delay, loop.isolated { _ in fires += 1 })
            let dateInPast = timer.fireDate <= .now
            loop.add(timer, forMode: .default)
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5))
            return (dateInPast, fires, result, ContinuousClock.now - start)
        }
        #expect(dateInPast)
        #expect(fires == 1)
        #expect(result == .finished)
        #expect(elapsed < .milliseconds(500))
    }

    // MARK: One loop per timer

    @Test func addingToASecondLoopIsAProgrammerError() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let timer = LoopTimer(after: .seconds(60)) { _ in }
            // Live loops: adding to a loop that has ended does nothing.
            let first = LoopThread(name: "first")
            let second = LoopThread(name: "second")
            first.loop.add(timer, forMode: .default)
            second.loop.add(timer, forMode: .default)
        }
        // Reported clearly: the message names the type.
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("LoopTimer"))
    }

    @Test func addingToTheSameLoopAgainIsFine() {
        let (contained, fires) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            let timer = LoopTimer(after: .milliseconds(2), loop.isolated { _ in fires += 1 })
            loop.add(timer, forMode: .default)
            loop.add(timer, forMode: .tracking)
            let contained = loop.contains(timer, inMode: .default) && loop.contains(timer, inMode: .tracking)
            loop.run(mode: .default, for: .seconds(5))
            return (contained, fires)
        }
        #expect(contained)
        #expect(fires == 1)
    }

    /// A timer's handler that runs the loop again in the same mode sees the other due timers fire
    /// there, in fire-date order, and itself not re-entered; nothing fires twice.
    @Test func aNestedRunInsideATimerFiresTheOtherDueTimers() {
        let calls = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            let past = ContinuousClock.now - .seconds(1)
            let first = LoopTimer(fireAt: past) { _ in
                calls.append("first")
                calls.append("nested \(loop.run(mode: .default, for: .zero))")
            }
            let second = LoopTimer(fireAt: past + .milliseconds(1)) { _ in calls.append("second") }
            let third = LoopTimer(fireAt: past + .milliseconds(2)) { _ in calls.append("third") }
            let keep = LoopSource {}
            for timer in [third, first, second] { loop.add(timer, forMode: .default) }
            loop.add(keep, forMode: .default)
            loop.run(mode: .default, for: .zero)
            loop.run(mode: .default, for: .zero)
            keep.invalidate()
        }
        #expect(calls.events == ["first", "second", "third", "nested timedOut"])
    }
}
