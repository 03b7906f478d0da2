import Glibc
import RunLoopKit
import Testing

// Code samples of the DocC article Timers.md (Sources/RunLoopKit/RunLoopKit.docc/Timers.md), run:
// these blocks appear here verbatim (indentation aside); DocumentationTests.swift holds its others.
// Tests of the same calls that the article no longer shows stay beside them. scripts/check-doc-
// snippets.py, run by `make docs`, fails when a block of the article is in none of the files its
// table names for it.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// When the sampler's callouts came.
private let samples = Recorder<ContinuousClock.Instant>()

/// A stand-in for the sampler's work.
private func takeSample() { samples.append(.now) }

/// A stand-in for the simulation a frame link paces: counts its steps.
private final class World: Sendable {
    private let durations = Recorder<Duration>()
    var steps: [Duration] { durations.events }
    func step(by duration: Duration) { durations.append(duration) }
}

// MARK: Timers

/// What the first timers printed in 2.3 s, then in the 0.6 s after `every` was postponed.
private struct TimersOutcome: Sendable {
    var firstSeconds: [String] = []
    var oncePassed = true
    var afterPostponing: [String] = []
    var tolerance: Duration = .zero
}

private func timers() -> TimersOutcome {
    var outcome = TimersOutcome()
    // One-shot, in 2 s (a one-shot timer invalidates itself after firing).
    let once = LoopTimer(after: .seconds(2)) { _ in print("two seconds later") }

    // Repeating every 500 ms, first fire in 500 ms.
    let every = LoopTimer(after: .milliseconds(500), repeating: .milliseconds(500)) { _ in print("tick") }

    // At an absolute instant, then every second, with 100 ms of slack.
    let start = ContinuousClock.now + .seconds(1)
    let aligned = LoopTimer(fireAt: start, interval: .seconds(1), tolerance: .milliseconds(100)) { timer in
        print("aligned tick; interval \(timer.interval!)")
    }

    let loop = Loop.current
    loop.add(once, forMode: .default)
    loop.add(every, forMode: .common)
    loop.add(aligned, forMode: .default)

    loop.run(mode: .default, for: .milliseconds(2_300))
    outcome.firstSeconds = printed.events
    outcome.oncePassed = !once.isValid
    printed.removeAll()

    every.fireDate = .now + .seconds(10)  // postpone
    every.tolerance = .milliseconds(50)

    loop.run(mode: .default, for: .milliseconds(600))
    outcome.afterPostponing = printed.events
    outcome.tolerance = every.tolerance
    every.invalidate()
    aligned.invalidate()
    return outcome
}

private func toleranceSharesAWakeUp() -> (elapsed: Duration, wakeUps: Int) {
    let started = ContinuousClock.now
    let loop = Loop.current
    var wakeUps = 0
    let wakes = LoopObserver(activities: .afterWaiting, loop.isolated { _, _ in wakeUps += 1 })
    loop.add(wakes, forMode: .common)
    let a = LoopTimer(after: .milliseconds(50), tolerance: .milliseconds(30)) { _ in print("a") }
    let b = LoopTimer(after: .milliseconds(70)) { _ in print("b") }
    loop.add(a, forMode: .default)
    loop.add(b, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))  // one wake-up at ~70 ms prints "a", then "b"
    wakes.invalidate()
    return (ContinuousClock.now - started, wakeUps)
}

private func invalidateFromTheHandler() -> (count: Int, valid: Bool, result: Loop.RunResult) {
    let loop = Loop.current
    var count = 0
    let three = LoopTimer(
        after: .milliseconds(100), repeating: .milliseconds(100),
        loop.isolated { timer in
            count += 1
            if count == 3 { timer.invalidate() }
        })
    loop.add(three, forMode: .default)
    let result = loop.run(mode: .default, for: .seconds(5))
    return (count, three.isValid, result)
}

// MARK: Missed-fire policies, frame links

private func delayedSampler() -> LoopTimer.MissedFirePolicy {
    let sampler = LoopTimer(
        after: .milliseconds(10), repeating: .milliseconds(10),
        missedFirePolicy: .burst
    ) { _ in takeSample() }
    sampler.missedFirePolicy = .delay

    // Busy elsewhere for 35 ms: the fires due at 10, 20 and 30 ms are missed.
    Loop.current.add(sampler, forMode: .default)
    usleep(35_000)
    runLoop(Loop.current, in: .default) { samples.count >= 4 }
    sampler.invalidate()
    return sampler.missedFirePolicy
}

private func frameLink(_ world: World) {
    let loop = Loop.current
    let link = FrameLink(framesPerSecond: 60) { link in
        // link.timestamp: this frame's time on the grid; link.targetTimestamp: the next frame's.
        world.step(by: link.frameDuration)
        if ContinuousClock.now > link.targetTimestamp { print("the frame at \(link.timestamp) ran over") }
    }
    link.add(to: loop, forMode: .common)  // .common: keeps running while the loop runs .tracking
    loop.run()
    link.invalidate()
}

// MARK: Tests

/// The chapters' code does what the chapters say. Serialized: the snippets share `printed`.
@Suite(.serialized) struct GuideTimerTests {
    init() { printed.removeAll() }

    @Test func oneShotRepeatingAndAlignedTimers() async {
        let outcome = await awaitFreshThread { timers() }
        let first = outcome.firstSeconds
        #expect(first.filter { $0 == "two seconds later" }.count == 1)
        #expect(outcome.oncePassed)
        // Fires at 0.5, 1, 1.5 and 2 s; at 1 and 2 s (give or take 100 ms).
        #expect((3...5).contains(first.filter { $0 == "tick" }.count))
        let alignedTicks = first.filter { $0 == "aligned tick; interval \(Duration.seconds(1))" }.count
        #expect((1...3).contains(alignedTicks))
        #expect(first.count == 1 + first.filter { $0 == "tick" }.count + alignedTicks)
        // Postponed by 10 s: no tick in the next 0.6 s.
        #expect(!outcome.afterPostponing.contains("tick"))
        #expect(outcome.tolerance == .milliseconds(50))
    }

    @Test func toleranceLetsTwoTimersShareAWakeUp() async {
        let (elapsed, wakeUps) = await awaitFreshThread { toleranceSharesAWakeUp() }
        #expect(printed.events == ["a", "b"])
        #expect(elapsed >= .milliseconds(70))
        #expect(wakeUps == 1)
    }

    @Test func aTimerInvalidatesItselfFromItsHandler() async {
        let (count, valid, result) = await awaitFreshThread { invalidateFromTheHandler() }
        #expect(count == 3)
        #expect(!valid)
        #expect(result == .finished)
    }

    @Test func theDelayPolicyKeepsTheSpacing() async {
        samples.removeAll()
        #expect(await awaitFreshThread { delayedSampler() } == .delay)
        let times = samples.events
        // One callout for the missed fires, then one every 10 ms at the earliest (not a burst).
        #expect(times.count >= 4)
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= .milliseconds(9) })
    }

    @Test func aFrameLinkPacesTheSimulation() async {
        let world = World()
        await awaitFreshThread {
            let loop = Loop.current
            once({ world.steps.count >= 12 }, then: { loop.stop() })
            frameLink(world)
        }
        #expect(world.steps.count >= 12)
        #expect(world.steps.allSatisfy { $0 == .seconds(1) / 60 })
        #expect(printed.events.allSatisfy { $0.hasPrefix("the frame at ") && $0.hasSuffix(" ran over") })
    }
}
