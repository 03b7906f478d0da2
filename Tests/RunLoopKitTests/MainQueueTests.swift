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
