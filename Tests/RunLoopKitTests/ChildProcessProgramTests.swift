import Testing

// The documentation's child processes as programs (Examples/), run as child processes themselves,
// on `Loop.main`: a child's exit, and a child spoken to over its standard streams.

@Suite struct ChildProcessProgramTests {
    /// WorkOffTheLoop.md, "Talking to a child over its standard streams": sort's input and output
    /// are connections; once sort has exited and its streams have closed, `.default` is empty and
    /// the run returns `.finished`.
    @Test func theGuidesSortSamplePrintsSortedLinesAndFinishes() async throws {
        try await expectProgram("example-sort", prints: ["apple", "pear", "finished"], within: .seconds(10))
    }

    /// WorkOffTheLoop.md: a supervisor restarts a failing child twice, 10 ms then 20 ms after its
    /// failures, then `.default` is empty and the run finishes.
    @Test func theSupervisorSampleRestartsTheChildTwice() async throws {
        try await expectProgram("example-supervisor", prints: ["starts: 3"], within: .seconds(5))
    }

    /// WorkOffTheLoop.md: `sh -c "exit 3"`, whose exit is delivered on the main loop.
    @Test func theChildExitSampleReportsTheStatus() async throws {
        let outcome = try await expectProgram("example-child-exit", within: .seconds(10))
        #expect(outcome.lines.count == 1, "\(outcome)")
        #expect(outcome.lines.first?.hasPrefix("sh ") == true, "\(outcome)")
        #expect(outcome.lines.first?.hasSuffix(": exited(3)") == true, "\(outcome)")
    }
}
