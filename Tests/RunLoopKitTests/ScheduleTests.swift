import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// `schedule(after:)`: a block for later, once, in its modes, never early, cancellable from any
/// thread with a clear answer.
@Suite struct ScheduleTests {
    /// Delays and tolerances become whole nanoseconds: truncated, negative ones zero, huge ones
    /// clamped (never trapping, never wrapping).
    @Test func delaysBecomeWholeNanoseconds() {
        #expect(Duration.zero.saturatingNanoseconds == 0)
        #expect(Duration.milliseconds(1_500).saturatingNanoseconds == 1_500_000_000)
        #expect(
            (Duration.nanoseconds(7) + .init(secondsComponent: 0, attosecondsComponent: 999_999_999))
                .saturatingNanoseconds == 7)
        #expect(Duration.milliseconds(-500).saturatingNanoseconds == 0)
        #expect(Duration.nanoseconds(-1).saturatingNanoseconds == 0)
        #expect(
            Duration.seconds(Int64.max / 1_000_000_000).saturatingNanoseconds == Int64.max / 1_000_000_000
                * 1_000_000_000)
        #expect(Duration.seconds(Int64.max).saturatingNanoseconds == .max)
        #expect(Duration.nanoseconds(Int64.max).saturatingNanoseconds == .max)
    }

    @Test func runsOnceOnTheLoopThreadNeverEarly() {
        let (runs, onLoopThread, elapsed, result) = onFreshThread {
            let loop = Loop.current
            let runs = Recorder<Bool>()
            let start = ContinuousClock.now
            let elapsed = Locked<Duration?>(nil)
            loop.schedule(after: .milliseconds(20)) {
                runs.append(loop.isCurrentThread)
                elapsed.withLock { $0 = ContinuousClock.now - start }
            }
            // The pending block keeps `.default` alive; once it ran, the mode is empty.
            let result = loop.run(mode: .default, for: .seconds(5))
            return (runs.count, runs.events.allSatisfy { $0 }, elapsed.withLock { $0 }, result)
        }
        #expect(runs == 1)
        #expect(onLoopThread)
        #expect(result == .finished)
        if let elapsed { #expect(elapsed >= .milliseconds(20)) } else { Issue.record("the block did not run") }
    }

    @Test func scheduledFromAnotherThreadWakesASleepingLoop() {
        let thread = LoopThread(name: "scheduled")
        defer { thread.stop() }
        let ran = DispatchSemaphore(value: 0)
        whenAsleep(thread.loop) {
            thread.loop.schedule(after: .milliseconds(5)) { ran.signal() }
        }
        #expect(ran.wait(timeout: .now() + 5) == .success)
    }

    @Test func aBlockForAnotherModeWaitsForIt() {
        let (duringDefault, duringTracking) = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            loop.add(keepAlive, forMode: .tracking)
            let runs = Recorder<Loop.Mode?>()
            loop.schedule(after: .milliseconds(5), inModes: [.tracking]) { runs.append(loop.currentMode) }
            loop.run(mode: .default, for: .milliseconds(50))
            let duringDefault = runs.count
            loop.run(mode: .tracking, for: .milliseconds(50))
            keepAlive.invalidate()
            return (duringDefault, runs.events)
        }
        #expect(duringDefault == 0)
        #expect(duringTracking == [.tracking])
    }

    @Test func cancelBeforeItsTimeMeansItNeverRuns() {
        let counter = DeinitCounter()
        let (ran, cancelled) = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            let ran = Recorder<Bool>()
            let tracked = counter.make()
            let handle = loop.schedule(after: .milliseconds(10)) {
                tracked.touch()
                ran.append(true)
            }
            handle.cancel()
            loop.run(mode: .default, for: .milliseconds(40))
            keepAlive.invalidate()
            return (ran.count, handle.isCancelled)
        }
        #expect(ran == 0)
        #expect(cancelled)
        #expect(counter.value == 1, "a cancelled block is released at once")
    }

    @Test func cancelAfterItRanSaysSo() {
        let (ran, cancelled) = onFreshThread {
            let loop = Loop.current
            let ran = Recorder<Bool>()
            let handle = loop.schedule(after: .zero) { ran.append(true) }
            loop.run(mode: .default, for: .seconds(1))
            handle.cancel()
            return (ran.count, handle.isCancelled)
        }
        #expect(ran == 1)
        #expect(!cancelled)
    }

    /// Cancels racing with the loop, from several threads: a handle that reads cancelled never ran,
    /// one that does not ran exactly once; none is lost.
    @Test func cancelRacesAreDecidedOnce() {
        let thread = LoopThread(name: "cancel-race")
        defer { thread.stop() }
        let loop = thread.loop
        let perThread = 2_000
        let runs = Locked<[Int: Int]>([:])
        let handles = Locked<[Int: LoopScheduled]>([:])
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for index in 0..<perThread {
                let id = worker * perThread + index
                let handle = loop.schedule(after: .microseconds(index % 50)) {
                    runs.withLock { $0[id, default: 0] += 1 }
                }
                handles.withLock { $0[id] = handle }
                if index % 2 == 0 { handle.cancel() }
            }
        }
        // Everything not cancelled has run once the loop has passed every block's time.
        let all = handles.withLock { $0 }
        let drained = DispatchSemaphore(value: 0)
        loop.schedule(after: .milliseconds(5)) { drained.signal() }
        #expect(drained.wait(timeout: .now() + 10) == .success)
        let ran = runs.withLock { $0 }
        var wrong = 0
        for (id, handle) in all {
            let count = ran[id, default: 0]
            if handle.isCancelled ? count != 0 : count != 1 { wrong += 1 }
        }
        #expect(all.count == 4 * perThread)
        #expect(wrong == 0)
    }

    @Test func anEndedLoopReturnsACancelledHandle() {
        let counter = DeinitCounter()
        let loop = endedLoop()
        let handle: LoopScheduled
        do {
            let tracked = counter.make()
            handle = loop.schedule(after: .zero) { tracked.touch() }
        }
        #expect(handle.isCancelled)
        #expect(counter.value == 1)
    }

    @Test func blocksPendingWhenTheThreadExitsAreCancelled() {
        let counter = DeinitCounter()
        let handle = Locked<LoopScheduled?>(nil)
        runOnJoinedThread {
            let tracked = counter.make()
            let scheduled = Loop.current.schedule(after: .seconds(60)) { tracked.touch() }
            handle.withLock { $0 = scheduled }
        }
        #expect(handle.withLock { $0?.isCancelled } == true)
        #expect(counter.value == 1)
    }

    /// A cancelled block leaves the queue at once: scheduling and cancelling many leaves nothing
    /// behind, and the handle goes with the caller's last reference.
    @Test func cancelledBlocksLeaveTheQueueAtOnce() {
        let thread = LoopThread(name: "churn")
        defer { thread.stop() }
        for _ in 0..<100_000 {
            thread.loop.schedule(after: .seconds(60)) {}.cancel()
        }
        #expect(thread.loop.scheduledQueue.withLock { $0.heap.count } == 0)
        #expect(thread.loop.scheduledPending.load(ordering: .acquiring) == 0)
        weak var released: LoopScheduled?
        do {
            let handle = thread.loop.schedule(after: .seconds(60)) {}
            released = handle
            handle.cancel()
        }
        #expect(released == nil)
    }

    /// Cancelling blocks from the middle of the queue keeps the others in order: every block left
    /// runs, earliest first, and no cancelled one runs.
    @Test func cancellingFromTheMiddleKeepsTheRestInOrder() {
        let loop = Loop.current
        let ran = Locked<[Int]>([])
        var handles: [LoopScheduled] = []
        // Delays in a scrambled order, so that entries sit all over the heap.
        let delays = (0..<200).map { ($0 * 73) % 200 }
        for (index, delay) in delays.enumerated() {
            handles.append(loop.schedule(after: .microseconds(delay * 10)) { ran.withLock { $0.append(index) } })
        }
        for index in stride(from: 0, to: delays.count, by: 3) { handles[index].cancel() }
        let kept = delays.indices.filter { $0 % 3 != 0 }
        #expect(loop.scheduledQueue.withLock { $0.heap.count } == kept.count)
        let deadline = ContinuousClock.now + .seconds(10)
        while ran.withLock({ $0.count }) < kept.count && ContinuousClock.now < deadline {
            loop.run(mode: .default, for: .milliseconds(50))
        }
        // The order of their times (each read from the clock as it was scheduled), ties in
        // scheduling order.
        let expected = kept.sorted { (handles[$0].latestTicks, $0) < (handles[$1].latestTicks, $1) }
        #expect(ran.withLock { $0 } == expected)
        #expect(handles.indices.allSatisfy { handles[$0].isCancelled == ($0 % 3 == 0) })
    }

    @Test func noModesIsAProgrammerError() async {
        await #expect(processExitsWith: .failure) {
            Loop.current.schedule(after: .zero, inModes: []) {}
        }
    }
}
