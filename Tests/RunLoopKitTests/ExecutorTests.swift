import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// An actor whose methods all run on a loop's thread.
actor LoopBoundCounter {
    let loop: Loop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private(set) var values: [Int] = []

    init(loop: Loop) { self.loop = loop }

    func append(_ value: Int) -> Bool {
        values.append(value)
        return loop.isCurrentThread
    }
}

struct Boom: Error, Equatable {}

@Suite struct ExecutorTests {
    @Test func actorMethodsRunOnTheLoopThreadInOrder() async {
        let thread = LoopThread(name: "actor-loop")
        defer { thread.stop() }
        let counter = LoopBoundCounter(loop: thread.loop)
        var allOnLoop = true
        for value in 0..<200 {
            allOnLoop = await counter.append(value) && allOnLoop
        }
        #expect(allOnLoop)
        #expect(await counter.values == Array(0..<200))
    }

    /// Many concurrent tasks hopping onto the loop's actor: nothing lost, nothing run twice.
    @Test func manyConcurrentTasksLoseNothing() async {
        let thread = LoopThread(name: "actor-many")
        defer { thread.stop() }
        let counter = LoopBoundCounter(loop: thread.loop)
        await withTaskGroup(of: Void.self) { group in
            for value in 0..<2_000 {
                group.addTask { _ = await counter.append(value) }
            }
        }
        let values = await counter.values
        #expect(values.count == 2_000)
        #expect(Set(values) == Set(0..<2_000))
    }

    @Test func taskExecutorPreferenceRunsOnTheLoop() async {
        let thread = LoopThread(name: "preferred")
        defer { thread.stop() }
        let loop = thread.loop
        let inTask = await Task(executorPreference: loop) { loop.isCurrentThread }.value
        #expect(inTask)
        let inScope = await withTaskExecutorPreference(loop) {
            await Self.nonisolatedProbe(loop)
        }
        #expect(inScope)
    }

    nonisolated static func nonisolatedProbe(_ loop: Loop) async -> Bool {
        loop.isCurrentThread
    }

    @Test func submitReturnsValuesAndErrors() async throws {
        let thread = LoopThread(name: "submit")
        defer { thread.stop() }
        let loop = thread.loop
        let value = try await loop.submit { loop.isCurrentThread ? 42 : -1 }
        #expect(value == 42)
        await #expect(throws: Boom.self) {
            try await loop.submit { () throws -> Int in throw Boom() }
        }
    }

    @Test func assumeIsolatedWorksOnTheLoopThread() async throws {
        let thread = LoopThread(name: "assume")
        defer { thread.stop() }
        let counter = LoopBoundCounter(loop: thread.loop)
        let ok = try await thread.loop.submit {
            counter.assumeIsolated { $0.loop.isCurrentThread }
        }
        #expect(ok)
        #expect(thread.loop.isIsolatingCurrentContext() == false)
    }

    @Test func assumeIsolatedElsewhereTraps() async {
        await #expect(processExitsWith: .failure) {
            let thread = LoopThread(name: "assume-elsewhere")
            ExecutorTests.touchIsolatedState(of: LoopBoundCounter(loop: thread.loop))
        }
    }

    /// Called off the loop's thread: `assumeIsolated` must trap.
    static func touchIsolatedState(of counter: LoopBoundCounter) {
        _ = counter.assumeIsolated { $0.values.count }
    }

    /// Jobs run in the loop's common modes only: a job posted while the loop runs a custom mode
    /// waits for a common one.
    @Test func jobsRunInCommonModesOnly() async throws {
        let thread = LoopThread(name: "job-modes")
        defer { thread.stop() }
        let loop = thread.loop
        let parked = Loop.Mode("parked")
        let release = Atomic<Bool>(false)
        let parkedRuns = Atomic<Int>(0)
        // Park the loop in a custom mode until released (the bound only guards against a test that
        // never releases it; every wait of the test itself is bounded below).
        loop.perform {
            let keep = LoopSource {}
            Loop.current.add(keep, forMode: parked)
            let deadline = ContinuousClock.now + .seconds(120)
            while !release.load(ordering: .acquiring) && ContinuousClock.now < deadline {
                Loop.current.run(mode: parked, for: .milliseconds(5))
                parkedRuns.add(1, ordering: .relaxed)
            }
            keep.invalidate()
        }
        defer { release.store(true, ordering: .releasing) }
        /// Waits (bounded) until the loop has made `count` parked runs.
        func waitForParkedRuns(_ count: Int) async throws -> Bool {
            let giveUp = ContinuousClock.now + .seconds(60)
            while parkedRuns.load(ordering: .relaxed) < count {
                guard ContinuousClock.now < giveUp else { return false }
                try await Task.sleep(for: .milliseconds(1))
            }
            return true
        }
        // Wait until the loop is really parked, then queue a job and let the parked runs go on.
        #expect(try await waitForParkedRuns(2))
        let job = Task(executorPreference: loop) { () -> (Bool, Loop.Mode?) in
            (loop.isCurrentThread, loop.currentMode)
        }
        let before = parkedRuns.load(ordering: .relaxed)
        #expect(try await waitForParkedRuns(before + 5))
        release.store(true, ordering: .releasing)
        let (onLoop, mode) = await job.value
        #expect(onLoop)
        #expect(mode == .default)  // not `parked`
    }
}
