import Dispatch
import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// `LoopThread`: a named thread that runs its loop until `shutdown()` (or `stop()`, the same
/// call), which ends it and joins it.
@Suite struct LoopThreadTests {
    /// The two names of ending a `LoopThread` for good.
    enum Ending: String, CaseIterable, Sendable {
        case shutdown, stop

        func end(_ thread: LoopThread) {
            switch self {
            case .shutdown: thread.shutdown()
            case .stop: thread.stop()
            }
        }

        /// The other name.
        var other: Ending { self == .shutdown ? .stop : .shutdown }
    }

    @Test(arguments: ["worker", "exactly15bytes!", "a-name-longer-than-fifteen-bytes"])
    func runsBlocksOnAThreadWithTheGivenName(name: String) {
        let thread = LoopThread(name: name)
        defer { thread.stop() }
        // The loop is there as soon as init returns.
        let loop = thread.loop
        let seen = Locked<(name: String, isLoopThread: Bool)?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.perform {
            let value = (kernelThreadName(), Loop.current === loop)
            seen.withLock { $0 = value }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 2) == .success)
        let observed = seen.withLock { $0 }
        #expect(observed?.name == String(decoding: name.utf8.prefix(15), as: UTF8.self))
        #expect(observed?.isLoopThread == true)
        #expect(thread.name == name)
    }

    @Test(arguments: Ending.allCases)
    func endingRunsWhatWasPostedThenJoinsTheThread(_ ending: Ending) {
        let thread = LoopThread(name: "stop-and-join")
        let loop = thread.loop
        // Items of a loop are released when its thread exits: once stop() has joined, they are invalid.
        let timer = LoopTimer(after: .seconds(3600)) { _ in }
        let observer = LoopObserver(activities: .allActivities) { _, _ in }
        loop.add(timer, forMode: .default)
        loop.add(observer, forMode: .default)
        let ran = DispatchSemaphore(value: 0)
        loop.perform { ran.signal() }
        #expect(ran.wait(timeout: .now() + 2) == .success)
        // Posted just before the end: it runs before the call returns.
        let lastRan = Locked(false)
        #expect(loop.perform { lastRan.withLock { $0 = true } })

        ending.end(thread)
        #expect(lastRan.withLock { $0 }, "a block posted before \(ending)() did not run")
        #expect(!timer.isValid)
        #expect(!observer.isValid)
        #expect(loop.hasEnded)

        let late = DispatchSemaphore(value: 0)
        #expect(!loop.perform { late.signal() })
        #expect(late.wait(timeout: .now() + .milliseconds(100)) == .timedOut, "a block posted after \(ending)() ran")
        // Idempotent, under either name.
        #expect(finishes(within: .seconds(2)) { ending.end(thread) })
        #expect(finishes(within: .seconds(2)) { ending.other.end(thread) })
    }

    /// `Loop.stop()` is another verb: it ends the current run, and the thread's loop runs on.
    @Test func stoppingTheLoopEndsARunNotTheThread() {
        let thread = LoopThread(name: "loop-stop")
        defer { thread.shutdown() }
        let loop = thread.loop
        for _ in 0..<3 {
            let stopped = DispatchSemaphore(value: 0)
            loop.perform {
                loop.stop()
                stopped.signal()
            }
            #expect(stopped.wait(timeout: .now() + 2) == .success)
        }
        let ran = DispatchSemaphore(value: 0)
        #expect(loop.perform { ran.signal() })
        #expect(ran.wait(timeout: .now() + 2) == .success, "the loop did not run on after Loop.stop()")
        #expect(!loop.hasEnded)
    }

    @Test(arguments: [Loop.Mode.default, .common])
    func timerAddedFromAnotherThreadFires(mode: Loop.Mode) {
        let thread = LoopThread(name: "timer-target")
        defer { thread.stop() }
        let loop = thread.loop
        let fired = DispatchSemaphore(value: 0)
        let firing = Locked<(onLoopThread: Bool, after: Duration)?>(nil)
        let start = ContinuousClock.now
        let timer = LoopTimer(after: .milliseconds(20)) { _ in
            let value = (Loop.current === loop, ContinuousClock.now - start)
            firing.withLock { $0 = value }
            fired.signal()
        }
        loop.add(timer, forMode: mode)
        #expect(fired.wait(timeout: .now() + 2) == .success)
        let observed = firing.withLock { $0 }
        #expect(observed?.onLoopThread == true)
        #expect((observed?.after ?? .zero) >= .milliseconds(20))
        // A one-shot timer is invalidated once its handler returns: check after a round trip.
        let roundTrip = DispatchSemaphore(value: 0)
        loop.perform { roundTrip.signal() }
        #expect(roundTrip.wait(timeout: .now() + 2) == .success)
        #expect(!timer.isValid)
    }

    @Test(arguments: Ending.allCases)
    func endingFromABlockOnTheThreadItselfDoesNotDeadlock(_ ending: Ending) {
        let thread = LoopThread(name: "self-stop")
        let loop = thread.loop
        // Released when the thread exits and its loop is torn down.
        let timer = LoopTimer(after: .seconds(3600)) { _ in }
        loop.add(timer, forMode: .default)
        let returned = DispatchSemaphore(value: 0)
        loop.perform {
            ending.end(thread)
            returned.signal()
        }
        #expect(returned.wait(timeout: .now() + 2) == .success, "\(ending)() on the loop's own thread did not return")
        // The thread exits once that block returns.
        let limit = ContinuousClock.now + .seconds(2)
        while timer.isValid && ContinuousClock.now < limit { sched_yield() }
        #expect(!timer.isValid, "the thread did not exit after ending itself")
        #expect(finishes(within: .seconds(2)) { ending.other.end(thread) })
        let late = DispatchSemaphore(value: 0)
        loop.perform { late.signal() }
        #expect(late.wait(timeout: .now() + .milliseconds(100)) == .timedOut, "the loop still ran after \(ending)()")
    }
}

/// The calling thread's name as the kernel has it (`/proc/thread-self/comm`, at most 15 bytes).
private func kernelThreadName() -> String {
    let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return comm.hasSuffix("\n") ? String(comm.dropLast()) : comm
}

/// Whether `body`, run on a new thread, returns within `timeout` (a hung `body` is left behind).
private func finishes(within timeout: Duration, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        body()
        done.signal()
    }
    let nanoseconds = Int(timeout.components.seconds) * 1_000_000_000
    return done.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success
}
