import Foundation
import Testing

@testable import RunLoopKit

/// What a repeating timer does about fires it missed while the loop was blocked, under each
/// `MissedFirePolicy`: interval 20 ms from the start, loop blocked from 10 ms to about 74 ms, so the
/// fires due at 20, 40 and 60 ms are missed.
@Suite struct TimerPolicyTests {
    typealias Instant = ContinuousClock.Instant

    static let interval = Duration.milliseconds(20)

    /// One callout of the timer under test.
    struct Fire: Sendable {
        /// The fire date the callout was for.
        var fireDate: Instant
        /// When the handler ran.
        var calledAt: Instant
    }

    /// The scenario: returns the start of the grid, when the blocking callout ended, and the fires.
    static func blockedScenario(
        _ policy: LoopTimer.MissedFirePolicy, fires count: Int
    ) -> (start: Instant, blockEnd: Instant, fires: [Fire]) {
        onFreshThread {
            let loop = Loop.current
            let start = ContinuousClock.now
            var fires: [Fire] = []
            var blockEnd = start
            // Due before the timer's first fire, so it always runs first: holds the loop until ~74 ms.
            let blocker = LoopTimer(
                fireAt: start + .milliseconds(10),
                loop.isolated { _ in
                    usleep(64_000)
                    blockEnd = .now
                })
            let timer = LoopTimer(
                fireAt: start + interval, interval: interval, missedFirePolicy: policy,
                loop.isolated { timer in
                    fires.append(Fire(fireDate: timer.fireDate, calledAt: .now))
                    if fires.count == count { timer.invalidate() }
                })
            loop.add(blocker, forMode: .default)
            loop.add(timer, forMode: .default)
            loop.run(mode: .default, for: .seconds(5))
            return (start, blockEnd, fires)
        }
    }

    @Test func keepPhaseIsTheDefault() {
        let timer = LoopTimer(after: .seconds(1), repeating: .seconds(1)) { _ in }
        #expect(timer.missedFirePolicy == .keepPhase)
        timer.missedFirePolicy = .delay
        #expect(timer.missedFirePolicy == .delay)
    }

    /// `.keepPhase`: one callout for 20, 40 and 60 when the loop unblocks, then 80, 100, … ms.
    @Test func keepPhaseCollapsesMissedFiresAndKeepsTheGrid() {
        let (start, blockEnd, fires) = Self.blockedScenario(.keepPhase, fires: 4)
        let interval = Self.interval
        #expect(fires.count == 4)
        guard fires.count == 4 else { return }
        #expect(fires[0].fireDate == start + interval)
        #expect(fires[0].calledAt >= blockEnd)
        // The next fire is the first grid point after the late callout: 80 ms unless the loop was
        // held up even longer.
        let k = Int(((fires[1].fireDate - start) / interval).rounded())
        #expect(fires[1].fireDate == start + interval * k, "off the original grid")
        #expect(fires[1].fireDate > fires[0].calledAt)
        #expect(fires[1].fireDate - interval <= fires[0].calledAt + .milliseconds(5))
        #expect(fires[2].fireDate == fires[1].fireDate + interval)
        #expect(fires[3].fireDate == fires[1].fireDate + interval * 2)
        // Exactly one callout before the grid resumed: the missed fires collapsed.
        #expect(fires.filter { $0.calledAt < fires[1].fireDate }.count == 1)
        for fire in fires { #expect(fire.calledAt >= fire.fireDate) }
    }

    /// `.burst`: 20, 40 and 60 are each called out, back to back, as soon as the loop unblocks;
    /// then 80, 100, … ms on time.
    @Test func burstCallsOutEveryMissedFire() {
        let (start, blockEnd, fires) = Self.blockedScenario(.burst, fires: 5)
        let interval = Self.interval
        #expect(fires.map(\.fireDate) == (1...5).map { start + interval * $0 })
        guard fires.count == 5 else { return }
        for fire in fires[0..<3] { #expect(fire.calledAt >= blockEnd) }
        // Caught up on successive iterations, without waiting an interval between them.
        #expect(fires[2].calledAt - fires[0].calledAt < interval)
        for fire in fires { #expect(fire.calledAt >= fire.fireDate) }
    }

    /// `.delay`: one late callout when the loop unblocks (~74 ms), then every interval from there:
    /// ~94, ~114 ms (the phase moves).
    @Test func delayRestartsTheIntervalFromTheLateCallout() {
        let (start, blockEnd, fires) = Self.blockedScenario(.delay, fires: 3)
        let interval = Self.interval
        #expect(fires.count == 3)
        guard fires.count == 3 else { return }
        #expect(fires[0].fireDate == start + interval)
        #expect(fires[0].calledAt >= blockEnd)
        // The next fire date is the late callout's time plus the interval (the loop reads the clock
        // just before the callout, the handler just after).
        #expect(fires[1].fireDate >= blockEnd + interval)
        #expect(fires[1].fireDate <= fires[0].calledAt + interval)
        #expect(fires[2].fireDate >= fires[1].fireDate + interval)
        #expect(fires[2].fireDate <= fires[1].calledAt + interval)
        // Not on the original grid's next point (80 ms): the phase moved with the late callout.
        #expect(fires[1].fireDate > start + interval * 4)
        for fire in fires { #expect(fire.calledAt >= fire.fireDate) }
    }

    /// A mode that does not hold the timer counts as blocked, too: under `.burst` the fires missed
    /// while the loop ran another mode are all called out when it comes back.
    @Test func burstCatchesUpAfterAnotherMode() {
        let fires: [Fire] = onFreshThread {
            let loop = Loop.current
            let start = ContinuousClock.now
            var fires: [Fire] = []
            let timer = LoopTimer(
                fireAt: start + .milliseconds(10), interval: .milliseconds(10), missedFirePolicy: .burst,
                loop.isolated { timer in
                    fires.append(Fire(fireDate: timer.fireDate, calledAt: .now))
                    if fires.count == 6 { timer.invalidate() }
                })
            loop.add(timer, forMode: .default)
            let other = LoopSource {}
            loop.add(other, forMode: .tracking)
            loop.run(mode: .tracking, for: .milliseconds(45))  // misses 10, 20, 30, 40
            loop.run(mode: .default, for: .seconds(5))
            other.invalidate()
            return fires
        }
        #expect(fires.count == 6)
        guard fires.count == 6 else { return }
        for index in 1..<6 {
            #expect(fires[index].fireDate == fires[0].fireDate + .milliseconds(10 * index))
        }
        // The missed fires come on successive iterations, without waiting for their dates (which
        // are 30 ms apart): generous for a loaded machine, far below the dates' spacing.
        #expect(fires[3].calledAt - fires[0].calledAt < .milliseconds(25))
    }
}
