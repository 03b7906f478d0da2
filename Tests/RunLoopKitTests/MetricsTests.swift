import Foundation
import Testing

@testable import RunLoopKit

/// `loop.metrics` against a workload whose counts are known in advance.
@Suite struct MetricsTests {
    struct Outcome: Sendable {
        var metrics: LoopMetrics
        var elapsed: Duration
        var timerFires: Int
        var results: [Loop.RunResult]
    }

    /// 5 blocks posted before metrics are on, 10 posted on the loop thread and 20 from another
    /// thread while it sleeps, 8 timer fires, an `entry`/`exit` observer over 3 runs of 100 ms.
    static func knownWorkload() -> Outcome {
        onFreshThread {
            let loop = Loop.current
            for _ in 0..<5 { loop.perform {} }  // not stamped: metrics are off
            loop.collectsMetrics = true
            for _ in 0..<10 { loop.perform {} }

            var fires = 0
            let timer = LoopTimer(
                after: .milliseconds(5), repeating: .milliseconds(5),
                loop.isolated { timer in
                    fires += 1
                    if fires == 8 { timer.invalidate() }
                })
            loop.add(timer, forMode: .default)
            let observer = LoopObserver(activities: [.entry, .exit]) { _, _ in }
            loop.add(observer, forMode: .default)
            let keepAlive = LoopSource {}  // never signalled: keeps .default alive, no callouts
            loop.add(keepAlive, forMode: .default)
            whenAsleep(loop) {
                for _ in 0..<20 { loop.perform {} }
            }

            let start = ContinuousClock.now
            var results: [Loop.RunResult] = []
            for _ in 0..<3 { results.append(loop.run(mode: .default, for: .milliseconds(100))) }
            let elapsed = ContinuousClock.now - start
            let metrics = loop.metrics
            keepAlive.invalidate()
            observer.invalidate()
            return Outcome(metrics: metrics, elapsed: elapsed, timerFires: fires, results: results)
        }
    }

    @Test func countsCalloutsOfAKnownWorkload() {
        let outcome = Self.knownWorkload()
        let metrics = outcome.metrics
        #expect(outcome.results == [.timedOut, .timedOut, .timedOut])
        #expect(outcome.timerFires == 8)
        #expect(metrics.callouts[.block] == 35)
        #expect(metrics.callouts[.timer] == 8)
        #expect(metrics.callouts[.observer] == 6)  // entry and exit of 3 runs
        #expect(metrics.callouts[.source] == nil)
        #expect(metrics.callouts[.descriptor] == nil)
        #expect(metrics.callouts[.job] == nil)
        // 8 timer fires alone need 8 wake-ups, hence iterations.
        #expect(metrics.iterations >= 9)
    }

    @Test func queueDelayCountsTheBlocksPostedWhileOn() throws {
        let metrics = Self.knownWorkload().metrics
        #expect(metrics.queueDelay.count == LoopMetrics.bucketCount)
        #expect(metrics.queueDelayCount == 30)
        let median = try #require(metrics.queueDelayQuantile(0.5))
        let worst = try #require(metrics.queueDelayQuantile(1))
        #expect(median <= worst)
        #expect(worst < .seconds(1))
    }

    @Test func waitingTimeIsTheIdleTime() {
        let outcome = Self.knownWorkload()
        let metrics = outcome.metrics
        let measured = metrics.waitingTime + metrics.busyTime
        // The loop spent almost all of its 300 ms asleep: a handful of trivial callouts.
        #expect(metrics.waitingTime >= outcome.elapsed * 0.6)
        #expect(metrics.waitingTime <= outcome.elapsed)
        #expect(metrics.busyTime > .zero)
        #expect(metrics.busyTime < outcome.elapsed * 0.4)
        // Busy and waiting cover the runs (only the gaps between the 3 runs are outside them).
        #expect(measured <= outcome.elapsed)
        #expect(measured >= outcome.elapsed * 0.9)
    }

    @Test func offMeansZeroAndOnAgainStartsFromZero() {
        let (whileOff, afterOff, again, flags) = onFreshThread {
            let loop = Loop.current
            let whileOff = loop.metrics
            loop.collectsMetrics = true
            loop.perform {}
            loop.run(mode: .default, for: .zero)
            let collected = loop.collectsMetrics
            loop.collectsMetrics = false
            let afterOff = loop.metrics
            loop.perform {}
            loop.run(mode: .default, for: .zero)
            loop.collectsMetrics = true
            let again = loop.metrics
            loop.collectsMetrics = false
            return (whileOff, afterOff, again, (collected, loop.collectsMetrics))
        }
        #expect(whileOff == LoopMetrics())
        #expect(afterOff == LoopMetrics())
        #expect(again == LoopMetrics())
        #expect(flags.0)
        #expect(!flags.1)
    }

    @Test func countsWhatRunsWhileOn() {
        let (blocks, iterations) = onFreshThread {
            let loop = Loop.current
            loop.collectsMetrics = true
            for _ in 0..<3 { loop.perform {} }
            loop.run(mode: .default, for: .zero)
            let metrics = loop.metrics
            loop.collectsMetrics = false
            return (metrics.callouts[.block], metrics.iterations)
        }
        #expect(blocks == 3)
        #expect(iterations == 1)
    }
}
