import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// One loop per thread, created lazily and torn down with its thread; an idle loop sleeps.
@Suite struct LifecycleTests {
    @Test func currentIsTheSameLoopOnOneThread() {
        let (same, sameInsideACallout) = onFreshThread {
            let loop = Loop.current
            let inside = Recorder<Bool>()
            loop.perform(inModes: [.default]) { inside.append(Loop.current === loop) }
            loop.run(mode: .default, for: .seconds(1))
            return (Loop.current === loop, inside.events)
        }
        #expect(same)
        #expect(sameInsideACallout == [true])
    }

    @Test func currentDiffersBetweenThreads() {
        // Both loops are kept alive here, so the second cannot reuse the first one's address.
        let first = onFreshThread { Loop.current }
        let second = onFreshThread { Loop.current }
        #expect(first !== second)
    }

    @Test func mainIsNotCurrentOnAnotherThread() {
        let (isCurrent, main) = onFreshThread { (Loop.main === Loop.current, Loop.main) }
        let mainElsewhere = onFreshThread { Loop.main }
        #expect(!isCurrent)
        #expect(main === mainElsewhere)
    }

    @Test func threadExitClosesTheLoopsDescriptors() async {
        // In a child process, so that no other test opens or closes descriptors meanwhile.
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let threads = 100
            let before = openDescriptorCount()
            let whileRunning = Locked<Int>(0)
            for _ in 0..<threads {
                runOnJoinedThread {
                    let loop = Loop.current
                    // A run with a timer: the loop's event backend exists and sleeps once.
                    let timer = LoopTimer(after: .milliseconds(1)) { _ in
                        let count = openDescriptorCount()
                        whileRunning.withLock { $0 = max($0, count) }
                    }
                    loop.add(timer, forMode: .default)
                    loop.run(mode: .default, for: .seconds(1))
                }
            }
            let after = openDescriptorCount()
            let peak = whileRunning.withLock { $0 }
            var failures: [String] = []
            if peak < before + 2 {
                failures.append("a running loop should hold descriptors: \(before) before, \(peak) while running")
            }
            if abs(after - before) > 2 {
                failures.append("\(threads) loop threads exited: \(before) descriptors before, \(after) after")
            }
            for failure in failures {
                FileHandle.standardError.write(Data("FAIL: \(failure)\n".utf8))
            }
            exit(failures.isEmpty ? EXIT_SUCCESS : EXIT_FAILURE)
        }
        let report = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(!report.contains("FAIL"), "\(report)")
    }

    @Test func idleLoopThreadSleepsWithoutCPUOrWakeUps() {
        let thread = LoopThread(name: "idle")
        defer { thread.stop() }
        let loop = thread.loop
        let wakeUps = Recorder<Loop.Activity>()
        let observer = LoopObserver(activities: .afterWaiting) { _, activity in wakeUps.append(activity) }
        // Adding the observer from here wakes the loop once; the settle block starts the count after that.
        loop.add(observer, forMode: .default)
        let cpuAtStart = Locked<Duration?>(nil)
        let settled = DispatchSemaphore(value: 0)
        loop.perform {
            wakeUps.removeAll()
            let now = threadCPUTime()
            cpuAtStart.withLock { $0 = now }
            settled.signal()
        }
        #expect(settled.wait(timeout: .now() + 2) == .success)

        // The idle second.
        Thread.sleep(forTimeInterval: 1)
        let wakeUpsWhileIdle = wakeUps.count
        let waitingWhileIdle = loop.isWaiting

        let cpuAtEnd = Locked<Duration?>(nil)
        let waitingInsideABlock = Locked<Bool?>(nil)
        let measured = DispatchSemaphore(value: 0)
        loop.perform {
            let now = threadCPUTime()
            cpuAtEnd.withLock { $0 = now }
            waitingInsideABlock.withLock { $0 = loop.isWaiting }
            measured.signal()
        }
        #expect(measured.wait(timeout: .now() + 2) == .success)

        #expect(wakeUpsWhileIdle == 0)
        #expect(waitingWhileIdle)
        #expect(waitingInsideABlock.withLock { $0 } == false)
        let start = cpuAtStart.withLock { $0 }
        let end = cpuAtEnd.withLock { $0 }
        #expect(start != nil && end != nil)
        if let start, let end {
            let used = end - start
            #expect(used < .milliseconds(20), "an idle loop thread used \(used) of CPU in one second")
        }
    }
}

/// Runs `body` on a new thread and returns once that thread has exited (its loop torn down).
