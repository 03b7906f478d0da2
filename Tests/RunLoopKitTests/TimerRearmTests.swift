import Testing

@testable import RunLoopKit

/// Re-arming a timer moves its entries in its mode's heaps in place: however often a timer is
/// re-armed, with or without tolerance, its mode holds one entry per heap it belongs in.
@Suite struct TimerRearmTests {
    /// The sizes of `mode`'s heaps: exact, by fire date, by latest fire time.
    static func heapSizes(of loop: Loop, _ mode: Loop.Mode) -> [Int] {
        loop.state.withLock { table in
            table.withItems(of: mode) { [$0.exact.count, $0.byFireDate.count, $0.byLatest.count] }
        }
    }

    @Test(arguments: [Duration.zero, .milliseconds(10)])
    func reArmingLeavesNoStaleEntries(tolerance: Duration) {
        let sizes = onFreshThread {
            let loop = Loop.current
            let base = ContinuousClock.now + .seconds(3600)
            let timer = LoopTimer(fireAt: base, tolerance: tolerance) { _ in }
            loop.add(timer, forMode: .default)
            for step in 0..<1_000 { timer.fireDate = base + .microseconds(step * 7_919 % 1_000) }
            defer { timer.invalidate() }
            return TimerRearmTests.heapSizes(of: loop, .default)
        }
        #expect(sizes == (tolerance == .zero ? [1, 0, 0] : [0, 1, 1]))
    }

    /// A timer switched between no tolerance and some, many times over, keeps one entry per heap
    /// it is in, and still fires once, at its last fire date.
    @Test func switchingToleranceLeavesNoStaleEntriesAndFires() {
        let (sizes, fires, early) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            var early = false
            let timer = LoopTimer(
                after: .seconds(3600),
                loop.isolated { timer in
                    fires += 1
                    early = ContinuousClock.now < timer.fireDate
                })
            loop.add(timer, forMode: .default)
            for step in 0..<500 {
                timer.tolerance = step & 1 == 0 ? .milliseconds(1) : .zero
                timer.fireDate = .now + .seconds(3600) + .microseconds(step)
            }
            let sizes = TimerRearmTests.heapSizes(of: loop, .default)
            timer.tolerance = .milliseconds(1)
            timer.fireDate = .now + .milliseconds(5)
            loop.run(mode: .default, for: .seconds(2))
            return (sizes, fires, early)
        }
        #expect(sizes == [1, 0, 0])
        #expect(fires == 1)
        #expect(!early)
    }

    /// A tolerant repeating timer re-armed from its own handler fires at each new date, and the
    /// heaps hold one entry each throughout.
    @Test func tolerantTimerReArmedFromItsHandlerKeepsOneEntryPerHeap() {
        let (fires, sizes) = onFreshThread {
            let loop = Loop.current
            var fires = 0
            var sizes: [[Int]] = []
            let timer = LoopTimer(
                after: .milliseconds(1), repeating: .seconds(3600), tolerance: .milliseconds(1),
                loop.isolated { timer in
                    fires += 1
                    sizes.append(TimerRearmTests.heapSizes(of: loop, .default))
                    if fires == 20 { timer.invalidate() } else { timer.fireDate = .now + .milliseconds(1) }
                })
            loop.add(timer, forMode: .default)
            loop.run(mode: .default, for: .seconds(10))
            return (fires, sizes)
        }
        #expect(fires == 20)
        // In the handler the fired entry has left the fire-date heap; the one by latest fire time
        // is the timer's, moved in place when it is re-armed.
        #expect(sizes.dropFirst().allSatisfy { $0[0] == 0 && $0[1] <= 1 && $0[2] <= 1 })
    }
}
