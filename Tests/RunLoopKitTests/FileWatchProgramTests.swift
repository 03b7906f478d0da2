import Foundation
import Glibc
import Testing

// CommandLineTools.md's `tail -f` (Examples/follow), run as a user runs it: on a file that sh
// appends to while it waits idle, then truncates (log rotation by copytruncate), then deletes.

@Suite struct FileWatchProgramTests {
    @Test func followPrintsWhatIsAppendedWaitsIdleAndEndsWhenTheFileGoes() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("app.log", contents: "old line, not shown\n")
        let program = try RunningProgram.start("example-follow", arguments: [file])
        let started = await program.waitForOutput("following \(file)\n")
        runShell("echo 'first line' >> '\(file)'; echo 'second line' >> '\(file)'")
        let appended = await program.waitForOutput("second line\n")
        let idle = await program.cpuWhileIdle()
        runShell(": > '\(file)'; echo 'after rotation' >> '\(file)'")
        let rotated = await program.waitForOutput("after rotation\n")
        runShell("rm '\(file)'")
        let outcome = await program.finish(within: .seconds(10))
        #expect(started && appended && rotated, "\(outcome)")
        expectQuietExit(outcome)
        #expect(
            outcome.lines == [
                "following \(file)", "first line", "second line", "after rotation",
                "follow: \(file) was deleted or moved away",
            ], "\(outcome)")
        #expect(idle != nil, "follow ended early: \(outcome)")
        if let idle {
            #expect(idle < cpuAllowance(fixed: .zero, waiting: .seconds(1)), "\(idle) of CPU in 1 s of waiting")
        }
    }

    /// A file that does not exist: the program says so on standard error and exits with status 1.
    @Test func followRefusesAMissingFile() async throws {
        let directory = try TemporaryDirectory()
        let outcome = try await RunningProgram.run(
            "example-follow", arguments: [directory.path + "/missing.log"], within: .seconds(10))
        #expect(outcome.termination == .exited(1), "\(outcome)")
        #expect(outcome.errorOutput.hasPrefix("follow: cannot open "), "\(outcome)")
    }
}
