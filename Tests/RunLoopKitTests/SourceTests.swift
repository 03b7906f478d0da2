import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// Custom (version 0) sources: `signal()` wakes the loop, signalled sources run by order then
/// signal time, each is unsignalled before its handler, and only in the modes that hold it.
@Suite struct SourceTests {
    @Test func signalFromAnotherThreadWakesASleepingLoop() {
        let signalled = Locked<ContinuousClock.Instant?>(nil)
        let performed = Locked<ContinuousClock.Instant?>(nil)
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { performed.withLock { $0 = .now } }
            loop.add(source, forMode: .default)
            whenAsleep(loop) {
                signalled.withLock { $0 = .now }
                source.signal()
            }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
            return (result, ContinuousClock.now - start)
        }
        #expect(result == .handledSource)
        #expect(elapsed < .seconds(1))
        let latency = performed.withLock { $0 }.map { $0 - signalled.withLock { $0! } }
        #expect(latency != nil)
        #expect((latency ?? .seconds(5)) < .milliseconds(50))
    }

    /// Sources "a" and "b" have order 0, "c" has order 1.
    @Test(arguments: [
        (["c", "a", "b"], ["a", "b", "c"]),
        (["b", "c", "a"], ["b", "a", "c"]),
        (["c", "b", "a"], ["b", "a", "c"]),
        (["a", "b", "c"], ["a", "b", "c"]),
    ])
    func signalledSourcesRunByOrderThenSignalTime(signals: [String], expected: [String]) {
        let performed = Recorder<String>()
        let result = onFreshThread {
            let loop = Loop.current
            var sources: [String: LoopSource] = [:]
            for (name, order) in [("a", 0), ("b", 0), ("c", 1)] {
                let source = LoopSource(order: order) { performed.append(name) }
                loop.add(source, forMode: .default)
                sources[name] = source
            }
            for name in signals { sources[name]!.signal() }
            // A zero timeout: exactly one pass.
            return loop.run(mode: .default, for: .zero)
        }
        #expect(result == .timedOut)
        #expect(performed.events == expected)
    }

    @Test func sourceIsUnsignalledBeforeItsHandlerRuns() {
        let performed = Recorder<Int>()
        let passes = Recorder<(result: Loop.RunResult, performed: Int)>()
        onFreshThread {
            let loop = Loop.current
            var source: LoopSource?
            source = LoopSource(
                loop.isolated {
                    performed.append(performed.count + 1)
                    // Signalled again from its own handler: it must run again, on a later pass.
                    if performed.count == 1 { source?.signal() }
                })
            loop.add(source!, forMode: .default)
            source!.signal()
            for timeout in [Duration.seconds(5), .seconds(5), .milliseconds(20)] {
                let result = loop.run(mode: .default, for: timeout, returnAfterSourceHandled: true)
                passes.append((result, performed.count))
            }
            source!.invalidate()
        }
        let results = passes.events
        #expect(results.map(\.result) == [.handledSource, .handledSource, .timedOut])
        #expect(results.map(\.performed) == [1, 2, 2])
        #expect(performed.events == [1, 2])
    }

    @Test(arguments: [1, 2, 5])
    func signallingSeveralTimesBeforeTheLoopRunsPerformsOnce(signals: Int) {
        let performed = Recorder<Int>()
        let result = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { performed.append(1) }
            loop.add(source, forMode: .default)
            for _ in 0..<signals { source.signal() }
            return loop.run(mode: .default, for: .milliseconds(20))
        }
        #expect(result == .timedOut)
        #expect(performed.count == 1)
    }

    @Test func sourceSignalledWhileItsModeIsNotRunningIsPerformedWhenItRuns() {
        let performed = Recorder<String>()
        let (defaultResult, afterDefault, otherResult) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let early = LoopSource { performed.append("early") }
            let late = LoopSource { performed.append("late") }
            loop.add(early, forMode: "other")
            loop.add(late, forMode: "other")
            // One signal before anything runs, one while .default runs (it must not be consumed there).
            early.signal()
            loop.perform(inModes: [.default]) { late.signal() }
            let defaultResult = loop.run(mode: .default, for: .milliseconds(20))
            let afterDefault = performed.events
            // One source per run that returns after a source: two runs.
            let otherResult = loop.run(mode: "other", for: .seconds(5), returnAfterSourceHandled: true)
            loop.run(mode: "other", for: .seconds(5), returnAfterSourceHandled: true)
            return (defaultResult, afterDefault, otherResult)
        }
        #expect(defaultResult == .timedOut)
        #expect(afterDefault.isEmpty)
        #expect(otherResult == .handledSource)
        #expect(performed.events == ["early", "late"])
    }

    @Test(arguments: [true, false])
    func signalledSourceCountsAsHandled(returnAfterSourceHandled: Bool) {
        let performed = Recorder<Int>()
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { performed.append(1) }
            loop.add(source, forMode: .default)
            whenAsleep(loop) { source.signal() }
            let start = ContinuousClock.now
            let result = loop.run(
                mode: .default, for: .milliseconds(300), returnAfterSourceHandled: returnAfterSourceHandled)
            return (result, ContinuousClock.now - start)
        }
        #expect(performed.count == 1)
        if returnAfterSourceHandled {
            #expect(result == .handledSource)
            #expect(elapsed < .milliseconds(250))
        } else {
            #expect(result == .timedOut)
            #expect(elapsed >= .milliseconds(300))
        }
    }

    @Test func invalidateFromInsideItsPerform() {
        let performed = Recorder<Int>()
        let (result, elapsed, isValid, contained) = onFreshThread {
            let loop = Loop.current
            var source: LoopSource?
            source = LoopSource(
                loop.isolated {
                    performed.append(1)
                    source?.invalidate()
                    // A signal after invalidation is ignored.
                    source?.signal()
                })
            loop.add(source!, forMode: .default)
            source!.signal()
            let start = ContinuousClock.now
            // The source is the mode's only item: invalidating it empties the mode.
            let result = loop.run(mode: .default, for: .seconds(5))
            let elapsed = ContinuousClock.now - start
            return (result, elapsed, source!.isValid, loop.contains(source!, inMode: .default))
        }
        #expect(result == .finished)
        #expect(elapsed < .seconds(1))
        #expect(performed.count == 1)
        #expect(!isValid)
        #expect(!contained)
    }

    @Test func invalidateFromAnotherThreadWhileTheLoopSleeps() {
        let performed = Recorder<Int>()
        let (result, elapsed, isValid) = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { performed.append(1) }
            loop.add(source, forMode: .default)
            whenAsleep(loop) {
                source.invalidate()
                source.signal()
            }
            let start = ContinuousClock.now
            // The only item goes away while the loop sleeps: the run ends as the mode is now empty.
            let result = loop.run(mode: .default, for: .seconds(5))
            return (result, ContinuousClock.now - start, source.isValid)
        }
        #expect(result == .finished)
        #expect(elapsed < .seconds(1))
        #expect(performed.count == 0)
        #expect(!isValid)
    }

    @Test func signalledThenInvalidatedIsNotPerformed() {
        let performed = Recorder<Int>()
        let result = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let source = LoopSource { performed.append(1) }
            loop.add(source, forMode: .default)
            source.signal()
            onFreshThread { source.invalidate() }
            return loop.run(mode: .default, for: .milliseconds(20))
        }
        #expect(result == .timedOut)
        #expect(performed.count == 0)
    }

    @Test(arguments: [false, true])
    func sourceAddedAlreadySignalledIsPerformed(addedFromAnotherThread: Bool) {
        let performed = Recorder<Int>()
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let source = LoopSource { performed.append(1) }
            source.signal()
            if addedFromAnotherThread {
                whenAsleep(loop) { loop.add(source, forMode: .default) }
            } else {
                loop.add(source, forMode: .default)
            }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
            return (result, ContinuousClock.now - start)
        }
        #expect(result == .handledSource)
        #expect(elapsed < .seconds(1))
        #expect(performed.count == 1)
    }
}
