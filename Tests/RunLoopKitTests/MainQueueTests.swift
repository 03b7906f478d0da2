import Foundation
import Testing

/// `Loop.main` draining `DispatchQueue.main` needs the real main thread, so the checks run in a
/// child process (`runloop-mainqueue-probe`) and its output is read here.
@Suite struct MainQueueTests {
    static func probeOutput(_ arguments: [String] = []) throws -> (lines: [String], status: Int32) {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0])
            .deletingLastPathComponent()
            .appendingPathComponent("runloop-mainqueue-probe")
        // The test bundle sits next to the package's executables (.build/<config>/).
        let candidates = [
            binary, Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("runloop-mainqueue-probe"),
        ]
        guard let executable = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw ProbeMissing(searched: candidates.map(\.path))
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        return (text.split(separator: "\n").map(String.init), process.terminationStatus)
    }

    struct ProbeMissing: Error, CustomStringConvertible {
        let searched: [String]
        var description: String { "runloop-mainqueue-probe not found at \(searched)" }
    }

    @Test func loopMainAsTheMainExecutorRunsMainActorJobs() throws {
        let (lines, status) = try Self.probeOutput(["--main-executor"])
        #expect(status == 0)
        #expect(lines == ["main executor job on main loop: true mode: default", "main executor run returned"])
    }

    /// The `main.swift` of docs/Guide.md's "The main dispatch queue on `Loop.main`".
    @Test func theGuidesMainLoopRunsMainQueueBlocksAndMainActorTasks() throws {
        let (lines, status) = try Self.probeOutput(["--guide"])
        #expect(status == 0)
        #expect(lines == ["on the main loop", "main actor, on the main loop"])
    }

    /// On the main thread, `Loop.main` sleeps in the kernel like any loop: a run of a mode with
    /// nothing to do, or with only the main queue to serve, uses next to no CPU. A program that never
    /// used the main queue sees its mode finish; once the queue has had work, its common modes wait.
    @Test func mainLoopSleepsAndFinishesLikeAnyOther() throws {
        let (lines, status) = try Self.probeOutput(["--idle"])
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

    @Test func mainLoopDrainsTheMainQueueInCommonModesOnly() throws {
        let (lines, status) = try Self.probeOutput()
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
