import Testing

@testable import RunLoopKit

@Suite struct RunResultTests {
    @Test func emptyModeFinishesWithoutCallouts() {
        let activities = Recorder<Loop.Activity>()
        let result = onFreshThread {
            let loop = Loop.current
            let observer = LoopObserver(activities: .allActivities) { _, activity in activities.append(activity) }
            loop.add(observer, forMode: .default)
            return loop.run(mode: .default, for: .seconds(1))
        }
        #expect(result == .finished)
        #expect(activities.events.isEmpty)
    }

    @Test func commonIsNotRunnable() {
        let result = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .common)
            return loop.run(mode: .common, for: .milliseconds(10))
        }
        #expect(result == .finished)
    }

    @Test func timesOutWhenNothingHappens() {
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .milliseconds(30))
            return (result, ContinuousClock.now - start)
        }
        #expect(result == .timedOut)
        #expect(elapsed >= .milliseconds(30))
        #expect(elapsed < .milliseconds(500))
    }

    @Test func handledSourceReturnsAfterOne() {
        let performed = Recorder<Int>()
        let result = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { performed.append(1) }
            loop.add(source, forMode: .default)
            source.signal()
            return loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
        }
        #expect(result == .handledSource)
        #expect(performed.count == 1)
    }

    /// CFRunLoop performs one custom source in a run that returns after a source; the others stay
    /// signalled and are performed by the following runs, by order.
    @Test func handledSourcePerformsOneOfSeveralSignalled() {
        let performed = Recorder<Int>()
        let results = onFreshThread {
            let loop = Loop.current
            let sources = (1...3).map { number in LoopSource(order: number) { performed.append(number) } }
            for source in sources.reversed() {
                loop.add(source, forMode: .default)
                source.signal()
            }
            let first = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
            let afterFirst = performed.events
            let second = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
            let third = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
            return ([first, second, third], afterFirst)
        }
        #expect(results.1 == [1])
        #expect(results.0 == [.handledSource, .handledSource, .handledSource])
        #expect(performed.events == [1, 2, 3])
    }

    /// Without `returnAfterSourceHandled`, a pass performs every signalled source.
    @Test func aPassPerformsEverySignalledSource() {
        let performed = Recorder<Int>()
        onFreshThread {
            let loop = Loop.current
            let sources = (1...3).map { number in LoopSource(order: number) { performed.append(number) } }
            for source in sources {
                loop.add(source, forMode: .default)
                source.signal()
            }
            let observer = LoopObserver(activities: .beforeWaiting) { _, _ in Loop.current.stop() }
            loop.add(observer, forMode: .default)
            loop.run(mode: .default, for: .seconds(5))
        }
        #expect(performed.events == [1, 2, 3])
    }

    @Test func phasesOfOneSleepingIteration() {
        let activities = Recorder<Loop.Activity>()
        onFreshThread {
            let loop = Loop.current
            let observer = LoopObserver(activities: .allActivities) { _, activity in activities.append(activity) }
            loop.add(observer, forMode: .default)
            loop.add(LoopTimer(after: .milliseconds(20)) { _ in activities.append([]) }, forMode: .default)
            // The one-shot timer fires after one sleep; then the mode is empty.
            #expect(loop.run(mode: .default, for: .seconds(5)) == .finished)
        }
        #expect(
            activities.events == [
                .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, [], .exit,
            ])
    }
}

@Suite struct RunResultBlockOnlyTests {
    /// A mode whose only content is a pending block runs it and finishes instead of sleeping until
    /// the timeout.
    @Test func blockOnlyModeFinishesAfterTheBlock() {
        let ran = Recorder<Int>()
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.perform(inModes: [.default]) { ran.append(1) }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5))
            return (result, ContinuousClock.now - start)
        }
        #expect(result == .finished)
        #expect(ran.count == 1)
        #expect(elapsed < .seconds(1))
    }
}
