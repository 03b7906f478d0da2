import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// A loop that has ended (its thread exited, its `LoopThread` was stopped, its `LoopGroup` shut
/// down) refuses work clearly, and nothing waits forever on it.
@Suite struct EndedLoopTests {
    /// The three ways a loop ends.
    enum Ending: String, CaseIterable, Sendable {
        case threadExited, loopThreadStopped, groupShutDown

        func makeEndedLoop() -> Loop {
            switch self {
            case .threadExited:
                // Joined: the thread's loop is torn down by the time this returns.
                let loop = Locked<Loop?>(nil)
                runOnJoinedThread { loop.withLock { $0 = Loop.current } }
                return loop.withLock { $0! }
            case .loopThreadStopped:
                return endedLoop()
            case .groupShutDown:
                let group = LoopGroup(threads: 2, name: "ended-group")
                group.shutdown()
                return group.loops[1]
            }
        }
    }

    @Test(arguments: Ending.allCases)
    func performReturnsFalseAndReleasesTheBlockUnrun(_ ending: Ending) {
        let loop = ending.makeEndedLoop()
        #expect(loop.hasEnded)
        let counter = DeinitCounter()
        let ran = Recorder<Bool>()
        var accepted = true
        do {
            let tracked = counter.make()
            accepted = loop.perform {
                tracked.touch()
                ran.append(true)
            }
        }
        let acceptedInModes = loop.perform(inModes: [.default, .tracking]) { ran.append(true) }
        #expect(!accepted)
        #expect(!acceptedInModes)
        #expect(counter.value == 1, "the refused block should be released at once")
        #expect(ran.count == 0)
    }

    @Test func aLiveLoopAcceptsBlocks() {
        let thread = LoopThread(name: "live")
        defer { thread.stop() }
        #expect(!thread.loop.hasEnded)
        let done = DispatchSemaphore(value: 0)
        #expect(thread.loop.perform { done.signal() })
        #expect(done.wait(timeout: .now() + 5) == .success)
    }

    @Test(arguments: Ending.allCases)
    func submitThrowsThatTheLoopHasEnded(_ ending: Ending) async {
        let loop = ending.makeEndedLoop()
        await #expect(throws: LoopError.loopEnded) {
            try await loop.submit { 42 }
        }
    }

    /// Submits racing with the stop: each one returns its value or throws, none is left waiting.
    @Test func submitsRacingWithStopAllComplete() async {
        for _ in 0..<20 {
            let thread = LoopThread(name: "racing")
            let loop = thread.loop
            let outcomes = await withTaskGroup(of: Bool?.self) { group in
                for value in 0..<50 {
                    group.addTask {
                        do {
                            return try await loop.submit { value } == value
                        } catch let error as LoopError {
                            return error == .loopEnded ? nil : false
                        } catch {
                            return false
                        }
                    }
                }
                group.addTask {
                    thread.stop()
                    return nil
                }
                var outcomes: [Bool?] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes.count == 51)
            #expect(!outcomes.contains(false))
        }
    }

    /// An actor bound to a loop that has ended still answers: its jobs run on the calling thread,
    /// one at a time, isolated to the loop's executor.
    @Test func anActorOfAnEndedLoopStillAnswersSerially() async {
        let counter = LoopBoundCounter(loop: endedLoop())
        await withTaskGroup(of: Void.self) { group in
            for value in 0..<200 {
                group.addTask { _ = await counter.append(value) }
            }
        }
        let values = await counter.values
        #expect(values.count == 200)
        #expect(Set(values) == Set(0..<200))
    }

    @Test func codeIsolatedToAnEndedLoopPassesItsIsolationCheck() async {
        let counter = LoopBoundCounter(loop: endedLoop())
        let isolated = await counter.checksIsolation()
        #expect(isolated)
    }

    /// They write nothing to the loop's eventfd (no thread will ever read it) and leave the loop
    /// ended: it still refuses work.
    @Test(arguments: Ending.allCases)
    func wakeUpAndStopOnAnEndedLoopDoNothing(_ ending: Ending) {
        let loop = ending.makeEndedLoop()
        // Whatever the ending itself left in the eventfd, so that only what follows is counted.
        Platform.drainEventDescriptor(loop.inbox.descriptor)
        loop.wakeUp()
        loop.stop()
        #expect(!Platform.drainEventDescriptor(loop.inbox.descriptor), "the eventfd was written")
        #expect(loop.hasEnded)
        #expect(!loop.perform {})
    }
}

extension LoopBoundCounter {
    /// Whether `assumeIsolated` accepts the thread this method runs on.
    func checksIsolation() -> Bool {
        loop.checkIsolated()
        return loop.isIsolatingCurrentContext() == true
    }
}
