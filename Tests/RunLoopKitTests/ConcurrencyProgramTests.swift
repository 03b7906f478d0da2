import Testing

// Concurrency.md's programs (Examples/), run as child processes: `loop.isolated` state at top
// level, an actor on a loop thread and a task that prefers a loop, awaited in main.swift.

@Suite struct ConcurrencyProgramTests {
    /// A port whose `loop.isolated` handler appends to a top-level array, read after the runs.
    @Test func theIsolatedPortSampleCollectsBothLines() async throws {
        try await expectProgram("example-isolated-port", prints: [#"["first", "second"]"#])
    }

    /// An actor whose executor is a loop thread, awaited at top level.
    @Test func theActorSampleRunsOnTheLoopsThread() async throws {
        try await expectProgram("example-actor", prints: ["true"])
    }

    /// A task that prefers a loop runs there; `submit` computes on the loop.
    @Test func theExecutorPreferenceSampleRunsOnTheLoop() async throws {
        try await expectProgram("example-executor-preference", prints: ["true 42"])
    }
}
