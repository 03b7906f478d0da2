import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

/// Where and when pool completions are delivered, and what happens to them when a loop or the
/// pool ends.
@Suite struct WorkPoolDeliveryTests {
    /// A `.default`-only completion waits while the loop runs `.tracking`, and runs in `.default`.
    @Test func completionsWaitForTheirModes() {
        let pool = LoopWorkPool(name: "wp-modes", threads: 1)
        defer { pool.shutdown() }
        let events = onFreshThread { () -> [String] in
            let loop = Loop.current
            var events: [String] = []
            let log = UncheckedBox { events.append($0) }
            pool.run({ 1 }, completingOn: loop, inModes: [.default]) { _ in log.value("default") }
            // One pool thread: this completion is posted after the first one.
            pool.run({ 2 }, completingOn: loop, inModes: [.tracking]) { _ in log.value("tracking") }
            runLoop(loop, in: .tracking) { events.contains("tracking") }
            log.value("tracking ended")
            runLoop(loop, in: .default) { events.contains("default") }
            return events
        }
        #expect(events == ["tracking", "tracking ended", "default"])
    }

    /// A completion for a loop whose thread has exited is dropped and counted, never run.
    @Test func completionsForAnEndedLoopAreDropped() async throws {
        let pool = LoopWorkPool(name: "wp-ended", threads: 1)
        defer { pool.shutdown() }
        let thread = LoopThread(name: "wp-ended-loop")
        thread.stop()
        let ran = Locked(false)
        pool.run({ 1 }, completingOn: thread.loop) { _ in ran.withLock { $0 = true } }
        // One pool thread: once this has run, the completion above was posted and released.
        try await pool.run {}
        #expect(pool.metrics.droppedCompletions == 1)
        #expect(!ran.withLock { $0 })
    }

    /// A completion the loop accepted but had not run when its thread exited is dropped and
    /// counted too.
    @Test func completionsPendingWhenTheLoopEndsAreDropped() async throws {
        let pool = LoopWorkPool(name: "wp-pending", threads: 1)
        defer { pool.shutdown() }
        let ran = Locked(false)
        let posted = DispatchSemaphore(value: 0)
        runOnJoinedThread {
            let loop = Loop.current
            pool.run({ 1 }, completingOn: loop, inModes: ["never-run"]) { _ in ran.withLock { $0 = true } }
            pool.run({ posted.signal() }, completingOn: sink) { _ in }
            posted.wait()
            // Taken into the loop's pending blocks, where it waits for its mode.
            loop.run(mode: .default, for: .zero)
        }
        try await pool.run {}
        #expect(pool.metrics.droppedCompletions == 1)
        #expect(!ran.withLock { $0 })
    }

    /// Shutdown: the running work finishes, queued work completes with CancellationError at
    /// once, later runs fail with a LoopError, and shutdown returns once the threads are gone.
    @Test func shutdownFinishesRunningWorkAndCancelsTheRest() async throws {
        let pool = LoopWorkPool(name: "wp-shutdown", threads: 1)
        let thread = LoopThread(name: "wp-shutdown-loop")
        defer { thread.stop() }
        let results = Recorder<String>()
        let cancelled = DispatchSemaphore(value: 0)
        let describe: @Sendable (Result<Void, any Error>) -> String = { result in
            switch result {
            case .success: "ran"
            case .failure(let error): error is CancellationError ? "cancelled" : "failed: \(error)"
            }
        }
        let (gate, _) = occupy(pool, completingOn: thread.loop) { results.append("a \(describe($0))") }
        for name in ["b", "c"] {
            pool.run({}, completingOn: thread.loop) {
                results.append("\(name) \(describe($0))")
                cancelled.signal()
            }
        }
        let stopped = DispatchSemaphore(value: 0)
        Thread {
            pool.shutdown()
            stopped.signal()
        }.start()
        // The queued work is cancelled while the running work still waits at its gate.
        for _ in 0..<2 { #expect(cancelled.wait(timeout: .now() + 10) == .success) }
        #expect(pool.queuedCount == 0)
        gate.signal()
        #expect(stopped.wait(timeout: .now() + 10) == .success)
        pool.shutdown()  // again: returns at once
        try await thread.loop.submit {}
        #expect(Set(results.events) == ["a ran", "b cancelled", "c cancelled"])

        let refused = Locked<(any Error)?>(nil)
        let refusedDone = DispatchSemaphore(value: 0)
        pool.run({ 1 }, completingOn: thread.loop) { result in
            if case .failure(let error) = result { refused.withLock { $0 = error } }
            refusedDone.signal()
        }
        #expect(refusedDone.wait(timeout: .now() + 10) == .success)
        #expect(refused.withLock { $0 } is LoopError)
        await #expect(throws: LoopError.self) { try await pool.run { 1 } }
        let metrics = pool.metrics
        #expect(metrics.completed == 1 && metrics.cancelled == 2 && metrics.rejected == 2)
    }

    /// Cancelling the task of an async `run` whose work has not started cancels the work.
    @Test func asyncRunMapsTaskCancellation() async throws {
        let pool = LoopWorkPool(name: "wp-async", threads: 1)
        defer { pool.shutdown() }
        let (gate, _) = occupy(pool)
        let ran = Locked(false)
        let task = Task { try await pool.run { ran.withLock { $0 = true } } }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        gate.signal()
        try await pool.run {}
        #expect(!ran.withLock { $0 })
    }

    /// The shared pool exists and runs work.
    @Test func sharedPoolRunsWork() async throws {
        #expect(LoopWorkPool.shared.threadCount == 4)
        #expect(try await LoopWorkPool.shared.run { 5 } == 5)
    }
}

/// A non-Sendable closure handed to completions that run on the very thread that owns it.
final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
