import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

@Suite struct WorkPoolTests {
    /// Work runs on a pool thread; its completion on the loop's thread with the work's result.
    @Test func workRunsOffTheLoopAndCompletesOnIt() throws {
        let pool = LoopWorkPool(name: "wp-basic", threads: 2)
        let thread = LoopThread(name: "wp-basic-loop")
        defer {
            thread.stop()
            pool.shutdown()
        }
        let loop = thread.loop
        let done = DispatchSemaphore(value: 0)
        let seen = Locked<(value: Int?, workOnLoop: Bool, completionOnLoop: Bool)>((nil, true, false))
        pool.run(
            { () -> Int in
                seen.withLock { $0.workOnLoop = loop.isCurrentThread }
                return 42
            }, completingOn: loop
        ) { result in
            seen.withLock {
                $0.value = try? result.get()
                $0.completionOnLoop = loop.isCurrentThread
            }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let (value, workOnLoop, completionOnLoop) = seen.withLock { $0 }
        #expect(value == 42)
        #expect(!workOnLoop)
        #expect(completionOnLoop)
    }

    /// An error thrown by the work reaches the completion and is counted.
    @Test func thrownErrorsReachTheCompletion() async throws {
        let pool = LoopWorkPool(name: "wp-throw", threads: 1)
        defer { pool.shutdown() }
        await #expect(throws: LoopError("no")) {
            try await pool.run { () throws -> Int in throw LoopError("no") }
        }
        #expect(try await pool.run { 7 } == 7)
        let metrics = pool.metrics
        #expect(metrics.completed == 2)
        #expect(metrics.failed == 1)
    }

    /// One thread runs work in the order it was queued.
    @Test func workStartsInQueueOrder() async throws {
        let pool = LoopWorkPool(name: "wp-fifo", threads: 1)
        defer { pool.shutdown() }
        let (gate, _) = occupy(pool)
        let order = Recorder<Int>()
        for index in 0..<200 {
            pool.run({ order.append(index) }, completingOn: sink) { _ in }
        }
        #expect(pool.queuedCount == 200)
        gate.signal()
        try await pool.run {}
        #expect(order.events == Array(0..<200))
    }

    /// At most `threads` pieces of work run at once; the rest wait, and the metrics say so.
    @Test func threadsAreBounded() async throws {
        let pool = LoopWorkPool(name: "wp-bound", threads: 3)
        defer { pool.shutdown() }
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let running = Locked((now: 0, most: 0))
        for _ in 0..<20 {
            pool.run(
                {
                    running.withLock {
                        $0.now += 1
                        $0.most = max($0.most, $0.now)
                    }
                    started.signal()
                    gate.wait()
                    running.withLock { $0.now -= 1 }
                }, completingOn: sink
            ) { _ in }
        }
        for _ in 0..<3 { #expect(started.wait(timeout: .now() + 10) == .success) }
        let busy = pool.metrics
        #expect(busy.running == 3)
        #expect(busy.queued == 17)
        for _ in 0..<20 { gate.signal() }
        try await pool.run {}
        // The pool starts work in order but three threads finish it in any order: the last of
        // the twenty may still be finishing when the one run after it has returned.
        #expect(await eventually { pool.metrics.completed == 21 && pool.metrics.running == 0 })
        #expect(running.withLock { $0.most } == 3)
        let metrics = pool.metrics
        #expect(metrics.completed == 21)
        #expect(metrics.running == 0 && metrics.queued == 0)
        #expect(metrics.maxQueueDelay > .zero)
        #expect(metrics.maxQueueDelay >= metrics.averageQueueDelay!)
        #expect(metrics.totalRunTime >= metrics.maxRunTime)
    }

    /// A pool whose threads are all blocked does not hold up another pool.
    @Test func aSlowPoolDoesNotStarveAnother() async throws {
        let slow = LoopWorkPool(name: "wp-slow", threads: 1)
        let fast = LoopWorkPool(name: "wp-fast", threads: 1)
        defer {
            slow.shutdown()
            fast.shutdown()
        }
        let (gate, _) = occupy(slow)
        #expect(try await fast.run { 1 } == 1)
        #expect(slow.queuedCount == 0 && slow.metrics.running == 1)
        gate.signal()
    }

    /// Cancelled before it starts: never runs, completes with CancellationError; a second
    /// cancel, or a cancel after the start, returns false and the work completes normally.
    @Test func cancelBeforeAndAfterTheStart() async throws {
        let pool = LoopWorkPool(name: "wp-cancel", threads: 1)
        defer { pool.shutdown() }
        let thread = LoopThread(name: "wp-cancel-loop")
        defer { thread.stop() }
        let results = Recorder<String>()
        let done = DispatchSemaphore(value: 0)
        let (gate, first) = occupy(pool, completingOn: thread.loop) { result in
            results.append((try? result.get()) != nil ? "first ran" : "first failed")
            done.signal()
        }
        let ran = Locked(false)
        let second = pool.run({ ran.withLock { $0 = true } }, completingOn: thread.loop) { result in
            if case .failure(let error) = result, error is CancellationError { results.append("second cancelled") }
            done.signal()
        }
        #expect(second.cancel())
        #expect(!second.cancel())
        #expect(!first.cancel())
        gate.signal()
        for _ in 0..<2 { #expect(done.wait(timeout: .now() + 10) == .success) }
        try await pool.run {}
        #expect(!ran.withLock { $0 })
        #expect(Set(results.events) == ["first ran", "second cancelled"])
        #expect(pool.metrics.cancelled == 1)
    }

    /// Races between the pool threads starting work and several threads cancelling it: work whose
    /// cancel returned true never runs, every other piece runs once, and every completion arrives.
    @Test func cancellationRaces() throws {
        let pool = LoopWorkPool(name: "wp-race", threads: 2)
        let thread = LoopThread(name: "wp-race-loop")
        defer {
            thread.stop()
            pool.shutdown()
        }
        let count = 4000
        let ran = (0..<count).map { _ in Locked(0) }
        let cancelledFirst = (0..<count).map { _ in Locked<Bool?>(nil) }
        let completed = (0..<count).map { _ in Locked<String?>(nil) }
        let allDone = DispatchSemaphore(value: 0)
        let remaining = Locked(count)
        var handles: [LoopWork] = []
        for index in 0..<count {
            handles.append(
                pool.run({ ran[index].withLock { $0 += 1 } }, completingOn: thread.loop) { result in
                    let outcome: String
                    switch result {
                    case .success: outcome = "ran"
                    case .failure(let error): outcome = error is CancellationError ? "cancelled" : "\(error)"
                    }
                    completed[index].withLock { $0 = $0 == nil ? outcome : "twice" }
                    if remaining.withLock({
                        $0 -= 1
                        return $0
                    }) == 0 {
                        allDone.signal()
                    }
                })
        }
        let items = handles
        // Four cancelling threads, each owning every fourth piece of work.
        DispatchQueue.concurrentPerform(iterations: 4) { lane in
            for index in stride(from: lane, to: count, by: 4) {
                let wasCancelled = items[index].cancel()
                if wasCancelled {
                    // Nothing may have run before, nor may run after.
                    #expect(ran[index].withLock { $0 } == 0)
                }
                cancelledFirst[index].withLock { $0 = wasCancelled }
            }
        }
        #expect(allDone.wait(timeout: .now() + 60) == .success)
        var cancelled = 0
        for index in 0..<count {
            let wasCancelled = cancelledFirst[index].withLock { $0 }!
            #expect(ran[index].withLock { $0 } == (wasCancelled ? 0 : 1))
            #expect(completed[index].withLock { $0 } == (wasCancelled ? "cancelled" : "ran"))
            if wasCancelled { cancelled += 1 }
        }
        let metrics = pool.metrics
        #expect(metrics.cancelled == UInt64(cancelled))
        #expect(metrics.completed == UInt64(count - cancelled))
    }
}
