import Testing

// Visibility.md's programs (Examples/), run as child processes on their main thread: metrics, a
// hang monitor, a tracer and an instrument of a run that should sleep between its few events.

@Suite struct VisibilityProgramTests {
    /// 100 blocks, then `.default` is empty and the run finishes.
    @Test func theMetricsSampleCountsTheBlocks() async throws {
        let outcome = try await expectProgram("example-metrics", within: .seconds(1))
        #expect(outcome.lines.count == 4, "\(outcome)")
        #expect(outcome.lines.dropFirst().first == "blocks: 100", "\(outcome)")
    }

    /// An 80 ms stall in a timer's handler is reported as one hang of about 80 ms.
    @Test func theHangMonitorReportsTheStall() async throws {
        let outcome = try await expectProgram("example-hang-monitor", within: .seconds(1))  // the stall sleeps: no CPU
        #expect(outcome.lines.count == 1, "\(outcome)")
        let report = outcome.lines.first ?? ""
        #expect(report.contains("; slowest callout: a timer, "), "\(outcome)")
        let stretch = report.dropFirst("hang: ".count).split(separator: " ").first.flatMap { Double($0) }
        #expect(stretch.map { (80..<500).contains($0) } == true, "a stretch of about 80 ms: \(outcome)")
    }

    /// A traced run with one 5 ms timer: a few dozen events, exported as JSON and SVG.
    @Test func theTracerSampleRecordsAFewEvents() async throws {
        let outcome = try await expectProgram("example-tracer", within: .seconds(1))
        let events = outcome.lines.first.flatMap { Int($0.split(separator: " ").first ?? "") }
        // Entry, phases, one sleep, one callout, exit: not a ring of 20,000 filled by spinning.
        #expect(events.map { (5..<1_000).contains($0) } == true, "\(outcome)")
        #expect(outcome.lines.dropFirst().first?.hasSuffix(" of SVG") == true, "\(outcome)")
    }

    /// An instrument of slow callouts sees the 20 ms timer handler.
    @Test func theInstrumentSampleSeesTheSlowCallout() async throws {
        try await expectProgram("example-instrument", prints: ["slow timer callout"], within: .seconds(1))
    }
}
