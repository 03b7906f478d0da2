import Dispatch
import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// Cross-thread blocks: `perform(inModes:_:)` wakes the loop, keeps every block and its order,
/// holds blocks for modes that are not running, never sleeps on a block, and coalesces wake-ups.
@Suite struct PerformTests {
    @Test func performFromAnotherThreadWakesASleepingLoop() {
        let posted = Locked<ContinuousClock.Instant?>(nil)
        let (result, latency, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let ran = Locked<ContinuousClock.Instant?>(nil)
            whenAsleep(loop) {
                posted.withLock { $0 = .now }
                loop.perform {
                    ran.withLock { $0 = .now }
                    Loop.current.stop()
                }
            }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5))
            let elapsed = ContinuousClock.now - start
            let latency = ran.withLock { $0 }.map { $0 - posted.withLock { $0! } }
            return (result, latency, elapsed)
        }
        #expect(result == .stopped)
        #expect(latency != nil)
        #expect((latency ?? .seconds(5)) < .milliseconds(50))
        #expect(elapsed < .seconds(1))
    }

    @Test func manyProducersLoseNothingDuplicateNothingAndKeepTheirOrder() {
        let producers = 4
        let perProducer = 10_000
        let total = producers * perProducer
        let ran = Recorder<Producer>()
        let result = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            Thread.detachNewThread {
                DispatchQueue.concurrentPerform(iterations: producers) { producer in
                    for sequence in 0..<perProducer {
                        loop.perform {
                            ran.append(Producer(id: producer, sequence: sequence))
                            if ran.count == total { Loop.current.stop() }
                        }
                    }
                }
            }
            return loop.run(mode: .default, for: .seconds(10))
        }
        #expect(result == .stopped)
        let events = ran.events
        #expect(events.count == total)
        for producer in 0..<producers {
            let sequences = events.filter { $0.id == producer }.map(\.sequence)
            #expect(sequences == Array(0..<perProducer), "producer \(producer): lost, repeated or reordered blocks")
        }
    }

    @Test(arguments: [false, true])
    func blocksForAModeNotRunningWaitForIt(postedFromAnotherThread: Bool) {
        let ran = Recorder<String>()
        let results = Recorder<Loop.RunResult>()
        let (afterDefault, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let post: @Sendable () -> Void = {
                loop.perform(inModes: ["other"]) { ran.append("other 1") }
                loop.perform(inModes: [.default]) { ran.append("default") }
                loop.perform(inModes: ["other"]) {
                    ran.append("other 2")
                    Loop.current.stop()
                }
                loop.perform(inModes: [.tracking]) { ran.append("tracking") }
            }
            if postedFromAnotherThread {
                onFreshThread(post)
            } else {
                post()
            }
            results.append(loop.run(mode: .default, for: .milliseconds(20)))
            let afterDefault = ran.events
            // Only the pending blocks make "other" non-empty: it runs them in order.
            let start = ContinuousClock.now
            results.append(loop.run(mode: "other", for: .seconds(5)))
            let elapsed = ContinuousClock.now - start
            // They ran once: "other" is empty now.
            results.append(loop.run(mode: "other", for: .seconds(5)))
            return (afterDefault, elapsed)
        }
        #expect(afterDefault == ["default"])
        #expect(results.events == [.timedOut, .stopped, .finished])
        #expect(elapsed < .seconds(1))
        #expect(ran.events == ["default", "other 1", "other 2"])
    }

    @Test func modeKeptAliveOnlyByBlocksFinishesOnceTheyRan() {
        let ran = Recorder<Int>()
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.perform(inModes: ["other"]) { ran.append(1) }
            loop.perform(inModes: ["other"]) { ran.append(2) }
            let start = ContinuousClock.now
            let result = loop.run(mode: "other", for: .seconds(5))
            return (result, ContinuousClock.now - start)
        }
        #expect(ran.events == [1, 2])
        #expect(result == .finished)
        #expect(elapsed < .seconds(1))
    }

    @Test func blocksQueuedFromABlockRunInTheSameRunWithoutSleeping() {
        let ran = Recorder<String>()
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            whenAsleep(loop) {
                loop.perform {
                    ran.append("first")
                    Loop.current.perform {
                        ran.append("second")
                        Loop.current.stop()
                    }
                    ran.append("first returns")
                }
            }
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: false)
            return (result, ContinuousClock.now - start)
        }
        #expect(result == .stopped)
        #expect(elapsed < .seconds(1))
        #expect(ran.events == ["first", "first returns", "second"])
    }

    @Test func postsWhileTheLoopIsBusyCostAtMostACoupleOfWakeUps() {
        let blocks = 1_000
        let ran = Recorder<Int>()
        let drain = Recorder<Loop.Activity>()
        let seenDuringDrain = Locked<[Loop.Activity]>([])
        let result = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let observer = LoopObserver(activities: [.beforeTimers, .afterWaiting]) { _, activity in
                drain.append(activity)
            }
            loop.add(observer, forMode: .default)
            let busy = DispatchSemaphore(value: 0)
            let go = DispatchSemaphore(value: 0)
            whenAsleep(loop) {
                loop.perform {
                    drain.removeAll()
                    busy.signal()
                    _ = go.wait(timeout: .now() + 5)
                }
                busy.wait()
                for index in 0..<blocks {
                    loop.perform {
                        ran.append(index)
                        if index == blocks - 1 {
                            seenDuringDrain.withLock { $0 = drain.events }
                            Loop.current.stop()
                        }
                    }
                }
                go.signal()
            }
            return loop.run(mode: .default, for: .seconds(5))
        }
        #expect(result == .stopped)
        #expect(ran.events == Array(0..<blocks))
        let activities = seenDuringDrain.withLock { $0 }
        let wakeUps = activities.filter { $0 == .afterWaiting }.count
        let iterations = activities.filter { $0 == .beforeTimers }.count
        #expect(wakeUps <= 3, "\(blocks) posts to a busy loop cost \(wakeUps) wake-ups")
        #expect(iterations <= 3, "\(blocks) posts to a busy loop cost \(iterations) iterations")
    }

    /// `wakeUp()` ends the loop's current or next sleep: called while the loop is busy (here in a
    /// block that posted nothing else), the sleep that follows ends at once, not at the timeout.
    /// Called alongside posts whose wake-up the loop reads before sleeping, it is not read with it.
    @Test(arguments: [false, true])
    func wakeUpWhileTheLoopIsBusyEndsItsNextSleep(withPosts: Bool) {
        let (result, sleptFor) = onFreshThread { () -> (Loop.RunResult, Duration?) in
            let loop = Loop.current
            loop.spinLimit = .zero
            loop.add(LoopSource {}, forMode: .default)
            let slept = Locked<ContinuousClock.Instant?>(nil)
            let woke = Locked<Duration?>(nil)
            let observer = LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, activity in
                if activity == .beforeWaiting {
                    slept.withLock { $0 = $0 ?? .now }
                } else if let start = slept.withLock({ $0 }) {
                    woke.withLock { $0 = $0 ?? .now - start }
                    Loop.current.stop()
                }
            }
            loop.perform {
                // Busy: another thread posts (maybe) and wakes the loop, then this returns.
                let done = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    if withPosts { loop.perform {} }
                    loop.wakeUp()
                    done.signal()
                }
                done.wait()
                loop.add(observer, forMode: .default)
            }
            let result = loop.run(mode: .default, for: .seconds(2))
            observer.invalidate()
            return (result, woke.withLock { $0 })
        }
        #expect(result == .stopped)
        #expect(sleptFor != nil)
        #expect(
            (sleptFor ?? .seconds(2)) < .milliseconds(50), "the sleep after wakeUp() lasted \(sleptFor ?? .seconds(2))")
    }

    /// An instrument attached from another thread is picked up however the attach falls against the
    /// loop's way to sleep (its wake-up is not read away with posts' before sleeping).
    @Test func anInstrumentAttachedFromAnotherThreadIsAlwaysPickedUp() {
        final class Iterations: LoopInstrument, @unchecked Sendable {
            let seen = DispatchSemaphore(value: 0)
            func loopWillIterate(_ loop: Loop, mode: Loop.Mode, at time: ContinuousClock.Instant) {
                seen.signal()
            }
        }
        var missed = 0
        for round in 0..<200 {
            let thread = LoopThread(name: "attach-\(round)")
            // Posts from here race with the attach: each has its own wake-up to read before sleeping.
            thread.loop.perform {}
            let instrument = Iterations()
            thread.loop.attach(instrument)
            if instrument.seen.wait(timeout: .now() + 2) != .success { missed += 1 }
            thread.loop.detach(instrument)
            thread.stop()
        }
        #expect(missed == 0, "\(missed) of 200 loops never picked up an attached instrument")
    }

    @Test func performWithNoModesIsAProgrammerError() async {
        await #expect(processExitsWith: .failure) {
            Loop.current.perform(inModes: []) {}
        }
    }
}

private struct Producer: Sendable, Equatable {
    let id: Int
    let sequence: Int
}
