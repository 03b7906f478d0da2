import Testing

/// `Loop.main` draining `DispatchQueue.main` needs the real main thread, so the checks run in a
/// child process (`runloop-mainqueue-probe`) and its output is read here. (The Guide's `main.swift`
/// on the main queue is a program of its own: MainLoopProgramTests.)
@Suite struct MainQueueTests {
    static func probeOutput(_ arguments: [String] = []) async throws -> (lines: [String], status: Int32) {
        let outcome = try await RunningProgram.run("runloop-mainqueue-probe", arguments: arguments)
        guard case .exited(let status) = outcome.termination else { return (outcome.lines, -1) }
        return (outcome.lines, status)
    }

    @Test func loopMainAsTheMainExecutorRunsMainActorJobs() async throws {
        let (lines, status) = try await Self.probeOutput(["--main-executor"])
        #expect(status == 0)
        #expect(lines == ["main executor job on main loop: true mode: default", "main executor run returned"])
    }

    @Test func mainLoopDrainsTheMainQueueInCommonModesOnly() async throws {
        let (lines, status) = try await Self.probeOutput()
        #expect(status == 0)
        #expect(
            lines == [
                "current is main: true",
                "default drained: default result: handledSource",
                "custom drained: false result: timedOut",
                "after default: true",
                "joined drained: true",
                "main actor task on main loop: true mode: default",
                "main actor run: stopped",
                "empty default: timedOut",
            ])
    }
}
