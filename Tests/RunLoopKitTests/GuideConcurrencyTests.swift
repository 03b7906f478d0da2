import RunLoopKit
import Testing

// Code samples of the DocC article Concurrency.md
// (Sources/RunLoopKit/RunLoopKit.docc/Concurrency.md), run: these blocks appear here verbatim
// (indentation aside); DocumentationTests.swift holds its others. The `main.swift` of the main
// queue is run as Examples/main-queue (MainLoopProgramTests), and the `@main` entry point is marked
// not run. Tests of the same calls that the article no longer shows stay beside them.
// scripts/check-doc-snippets.py, run by `make docs`, fails when a block of the article is in none
// of the files its table names for it.

/// The loops the stand-ins below ran on.
private let ranOn = Recorder<Loop>()

/// Stand-ins for work that runs where its task prefers.
private func computeOnTheLoop() -> Loop { Loop.current }
private func nonisolatedWork() async { ranOn.append(Loop.current) }
private func countOpenFiles() throws -> Int { openDescriptorCount() }

// MARK: A loop as an executor

/// What the executor snippets saw.
private struct ExecutorOutcome: Sendable {
    var taskRanOnTheLoop = false
    var scopeRanOnTheLoop = false
    var assumedIsolation = false
    var openFiles = 0
}

private func loopAsAnExecutor() async throws -> ExecutorOutcome {
    var outcome = ExecutorOutcome()
    let bytes: [UInt8] = [1, 2, 3]
    actor Connection {
        let loop: Loop
        nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
        init(loop: Loop) { self.loop = loop }
        func handle(_ bytes: [UInt8]) { /* on the loop's thread */  }
    }
    let io = LoopThread(name: "io")
    let connection = Connection(loop: io.loop)
    await connection.handle(bytes)

    let value = await Task(executorPreference: io.loop) { computeOnTheLoop() }.value
    await withTaskExecutorPreference(io.loop) { await nonisolatedWork() }
    outcome.taskRanOnTheLoop = value === io.loop
    outcome.scopeRanOnTheLoop = ranOn.events.last === io.loop

    io.loop.perform {
        connection.assumeIsolated { $0.handle([]) }  // fine: this is the loop's thread
    }
    // Queued after the block above: once it has run, so has the block, which would have trapped
    // if the actor's executor were not the loop.
    outcome.assumedIsolation = try await io.loop.submit { true }

    let count = try await io.loop.submit { try countOpenFiles() }
    outcome.openFiles = count
    io.stop()
    return outcome
}

// MARK: A global actor on a loop thread

@globalActor
actor NetworkActor {
    static let thread = LoopThread(name: "network")
    static let shared = NetworkActor()
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        Self.thread.loop.asUnownedSerialExecutor()
    }
}

@NetworkActor final class NetworkSession {
    func poll() { /* always on the "network" thread, next to its descriptor sources */  }
}

extension NetworkSession {
    /// Isolated to `NetworkActor` like `poll()`: whether it runs on the actor's thread.
    func runsOnTheNetworkThread() -> Bool { Loop.current === NetworkActor.thread.loop }
}

// MARK: Tests

@Suite struct GuideConcurrencyTests {
    @Test func anActorOrATaskRunsOnItsLoop() async throws {
        let outcome = try await loopAsAnExecutor()
        #expect(outcome.taskRanOnTheLoop)
        #expect(outcome.scopeRanOnTheLoop)
        #expect(outcome.assumedIsolation)
        #expect(outcome.openFiles > 0)
    }

    @Test func aGlobalActorRunsOnItsLoopThread() async {
        let session = NetworkSession()
        await session.poll()
        #expect(await session.runsOnTheNetworkThread())
    }
}
