import Testing

// The documentation's child processes as programs (Examples/), run as child processes themselves,
// on `Loop.main`: a child's exit, and a child spoken to over its standard streams.

@Suite struct ChildProcessProgramTests {
    /// docs/Guide.md, "Talking to a child over its standard streams": sort's input and output are
    /// connections; once sort has exited and its streams have closed, `.default` is empty and the
    /// run returns `.finished`.
    @Test func theGuidesSortSamplePrintsSortedLinesAndFinishes() throws {
        let outcome = try RunningProgram.run("example-sort")
        expectQuietExit(outcome)
        #expect(outcome.lines == ["apple", "pear", "finished"], "\(outcome)")
        #expect(outcome.wall < .seconds(10), "finished, not timed out: \(outcome)")
    }

    /// WorkOffTheLoop.md: `sh -c "exit 3"`, whose exit is delivered on the main loop.
    @Test func theChildExitSampleReportsTheStatus() throws {
        let outcome = try RunningProgram.run("example-child-exit")
        expectQuietExit(outcome)
        #expect(outcome.lines.count == 1, "\(outcome)")
        #expect(outcome.lines.first?.hasPrefix("sh ") == true, "\(outcome)")
        #expect(outcome.lines.first?.hasSuffix(": exited(3)") == true, "\(outcome)")
        #expect(outcome.wall < .seconds(10), "\(outcome)")
    }
}
