import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

/// `LoopProcess` outcomes off the usual path: a handler set after the exit was delivered, a
/// waiting task cancelled, a child that other code reaped first.
@Suite(.serialized) struct ProcessOutcomeTests {
    @Test func aHandlerSetAfterTheExitRunsOnTheLoopInTheModeOfTheDelivery() throws {
        let process = try LoopProcess(executable: "/bin/sh", arguments: ["-c", "exit 7"])
        let (late, lateModes, whileInDefault) = onFreshThread {
            let loop = Loop.current
            let importing = Loop.Mode("import")
            loop.add(process, forMode: importing)
            let delivered = Locked(false)
            process.onExit { _, _ in delivered.withLock { $0 = true } }
            runLoop(loop, in: importing) { delivered.withLock { $0 } }

            // Set now, after the delivery: queued on this loop, in the mode of the delivery.
            let late = Recorder<LoopProcess.Status>()
            let lateModes = Recorder<Loop.Mode?>()
            process.onExit { process, status in
                late.append(status)
                lateModes.append(loop.currentMode)
                #expect(process.status == status)
            }
            loop.run(mode: .default, for: .milliseconds(20))
            let whileInDefault = late.count
            runLoop(loop, in: importing) { late.count == 1 }
            return (late.events, lateModes.events, whileInDefault)
        }
        #expect(whileInDefault == 0)
        #expect(late == [.exited(7)])
        #expect(lateModes == [Loop.Mode("import")])
    }

    @Test func cancellingAWaitingTaskThrowsCancellationAndTheExitIsStillDelivered() async throws {
        let thread = LoopThread(name: "proc-cancel")
        defer { thread.stop() }
        let sleeper = try LoopProcess(executable: "/bin/sleep", arguments: ["30"])
        thread.loop.add(sleeper, forMode: .common)
        let waiting = Task { try await sleeper.exitStatus() }
        waiting.cancel()
        do {
            let status = try await waiting.value
            Issue.record("exitStatus() returned \(status) to a cancelled task")
        } catch {
            #expect(error is CancellationError)
        }
        #expect(sleeper.status == nil)
        // The process is still watched: its exit reaches the loop and a new waiter.
        sleeper.signal(SIGKILL)
        #expect(try await sleeper.exitStatus() == .signalled(SIGKILL))
    }

    @Test func aChildReapedByOtherCodeFailsItsWaitersWithALoopError() async throws {
        let thread = LoopThread(name: "proc-stolen")
        defer { thread.stop() }
        let process = try LoopProcess(executable: "/bin/sh", arguments: ["-c", "exit 0"])
        let handled = Locked(false)
        process.onExit { _, _ in handled.withLock { $0 = true } }
        // Other code reaps the child before any loop watches it.
        var status: Int32 = 0
        #expect(waitpid(process.pid, &status, 0) == process.pid)
        thread.loop.add(process, forMode: .common)
        do {
            let status = try await process.exitStatus()
            Issue.record("exitStatus() returned \(status) for a child reaped elsewhere")
        } catch let error as LoopError {
            #expect(error.systemError == ECHILD)
        }
        // Later waiters are told why.
        do {
            _ = try await process.exitStatus()
            Issue.record("a second exitStatus() returned for a child reaped elsewhere")
        } catch let error as LoopError {
            #expect(error.systemError == ECHILD)
            #expect(error.message.contains("reaped by other code"))
        }
        #expect(process.status == nil)
        #expect(!handled.withLock { $0 })
    }
}
