import Testing

/// `Loop.main` draining `DispatchQueue.main` needs the real main thread, so the checks run in a
/// child process (`runloop-mainqueue-probe`) and its output is read here. (Concurrency.md's
/// `main.swift` on the main queue is a program of its own: MainLoopProgramTests.)
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

    /// On the main thread, `Loop.main` sleeps in the kernel like any loop: a run of a mode with
    /// nothing to do, or with only the main queue to serve, uses next to no CPU. A program that never
    /// used the main queue sees its mode finish; once the queue has had work, its common modes wait.
    @Test func mainLoopSleepsAndFinishesLikeAnyOther() async throws {
        let (lines, status) = try await Self.probeOutput(["--idle"])
        #expect(status == 0)
        func figures(_ label: String) -> (result: String, cpu: Int, wall: Int)? {
            guard let line = lines.first(where: { $0.hasPrefix(label + ": ") }) else { return nil }
            let words = line.dropFirst(label.count + 2).split(separator: " ")
            guard words.count == 5, let cpu = Int(words[2]), let wall = Int(words[4]) else { return nil }
            return (String(words[0]), cpu, wall)
        }
        let nothing = try #require(figures("nothing in default"), "\(lines)")
        #expect(nothing.result == "finished")
        #expect(nothing.wall < 100)
        let timer = try #require(figures("one-shot timer"), "\(lines)")
        #expect(timer.result == "finished")
        #expect(timer.cpu < 20)
        #expect(timer.wall < 500)
        let mainQueue = try #require(figures("main queue only"), "\(lines)")
        #expect(mainQueue.result == "timedOut")
        #expect(mainQueue.cpu < 50)
        #expect(mainQueue.wall >= 1000)
        let custom = try #require(figures("custom mode, main queue waiting"), "\(lines)")
        #expect(custom.result == "timedOut")
        #expect(custom.cpu < 50)
        let tracking = try #require(figures("tracking"), "\(lines)")
        #expect(tracking.result == "handledSource")
        #expect(
            lines.filter { !$0.contains("cpu-ms") } == [
                "tick", "main queue block", "waited for a common mode",
            ])
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
