import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

/// A pending `schedule(after:inModes:)` block for named modes keeps exactly those modes alive:
/// a run in one of them waits for it, a run in another mode finds nothing to do.
@Suite struct ScheduleLivenessTests {
    @Test func aBlockForANamedModeKeepsThatModeAlive() {
        let (result, ran, elapsed) = onFreshThread {
            let loop = Loop.current
            let ran = Locked(false)
            let start = ContinuousClock.now
            loop.schedule(after: .milliseconds(30), inModes: [Loop.Mode("import")]) { ran.withLock { $0 = true } }
            // Nothing else is in "import": only the pending block keeps the run from finishing at once.
            let result = loop.run(mode: Loop.Mode("import"), for: .seconds(5))
            return (result, ran.withLock { $0 }, ContinuousClock.now - start)
        }
        #expect(ran)
        #expect(result == .finished)
        #expect(elapsed >= .milliseconds(30))
        #expect(elapsed < .seconds(5))
    }

    @Test func aBlockForANamedModeDoesNotKeepAnotherModeAlive() {
        let (result, ran, elapsed) = onFreshThread {
            let loop = Loop.current
            let ran = Locked(false)
            let handle = loop.schedule(after: .milliseconds(30), inModes: [.tracking]) { ran.withLock { $0 = true } }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5))
            let elapsed = ContinuousClock.now - start
            handle.cancel()
            return (result, ran.withLock { $0 }, elapsed)
        }
        #expect(result == .finished)
        #expect(!ran)
        #expect(elapsed < .seconds(2))
    }

    @Test func commonAmongNamedModesKeepsEveryCommonModeAlive() {
        let (results, runs) = onFreshThread {
            let loop = Loop.current
            let runs = Recorder<Loop.Mode?>()
            var results: [Loop.RunResult] = []
            for mode in [Loop.Mode.default, .tracking] {
                loop.schedule(after: .milliseconds(10), inModes: [.common, Loop.Mode("import")]) {
                    runs.append(loop.currentMode)
                }
                results.append(loop.run(mode: mode, for: .seconds(5)))
            }
            return (results, runs.events)
        }
        #expect(results == [.finished, .finished])
        #expect(runs == [.default, .tracking])
    }

    @Test func aCancelledBlockNoLongerKeepsItsModeAlive() {
        let (result, elapsed, cancelled) = onFreshThread {
            let loop = Loop.current
            let handle = loop.schedule(after: .seconds(30), inModes: [Loop.Mode("import")]) {}
            handle.cancel()
            let start = ContinuousClock.now
            let result = loop.run(mode: Loop.Mode("import"), for: .seconds(5))
            return (result, ContinuousClock.now - start, handle.isCancelled)
        }
        #expect(cancelled)
        #expect(result == .finished)
        #expect(elapsed < .seconds(2))
    }
}
