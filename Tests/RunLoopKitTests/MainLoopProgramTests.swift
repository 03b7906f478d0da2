import Foundation
import Glibc
import Testing

// The documentation's programs on `Loop.main`, each built as an executable of its own from its
// main.swift in Examples/ (the program as the documentation shows it) and run as a child process,
// as a user runs it: what it prints, how it ends, its wall time, and the CPU it uses, which for a
// loop that waits must stay under 5 % of one core while it waits (`cpuAllowance`).

@Suite struct MainLoopProgramTests {
    /// RunLoopKit.md's overview (and LoopsAndModes.md's first sample): a 10 ms one-shot timer,
    /// then `run(mode: .default, for: .seconds(1))`, which its comment says returns `.finished`.
    @Test func theOverviewPrintsTickAndFinishesWithoutSpinning() async throws {
        // A run that timed out took its whole second; one that finished, 10 ms and the start. 20 ms
        // of CPU in all, the program's start included.
        let outcome = try await expectProgram("example-overview", prints: ["tick", "finished"], within: .seconds(1))
        #expect(outcome.cpu < cpuAllowance(fixed: .milliseconds(20), waiting: .zero), "\(outcome)")
    }

    /// README.md's example: two timers in two modes, then a job on a worker thread that signals a
    /// source of the main loop.
    @Test func theReadmeExampleTicksInItsModesAndHearsFromItsWorker() async throws {
        let outcome = try await expectProgram("example-readme")
        let lines = outcome.lines
        // The worker's line, then the main loop's answer, last; the default-mode timer may still
        // tick in between while the worker's job waits for its thread (a loaded machine).
        #expect(
            lines.filter { !$0.hasSuffix(" tick") } == ["working on the worker thread", "back on the main thread"],
            "\(outcome)")
        #expect(lines.last == "back on the main thread", "\(outcome)")
        // .tracking (500 ms): the common-mode timer only, about 5 times, before any default tick.
        let tracking = lines.prefix { $0 != "default-mode tick" }
        #expect(tracking.allSatisfy { $0 == "common-mode tick" }, "\(outcome)")
        #expect((1...6).contains(tracking.count), "\(outcome)")  // fewer on a loaded machine
        // .default (500 ms): both; the default-mode timer's missed ticks collapse into one.
        #expect((1...7).contains(lines.filter { $0 == "default-mode tick" }.count), "\(outcome)")
        // Two runs of 500 ms, then one that returns once the worker's signal is handled (not its 5 s).
        #expect(outcome.wall < .seconds(4), "\(outcome)")
    }

    /// LoopsAndModes.md: a timer's callout runs the loop in a modal mode until another timer
    /// answers, then the outer run continues in `.default` and finishes.
    @Test func theNestedRunSampleReturnsToTheOuterMode() async throws {
        try await expectProgram(
            "example-modal", prints: ["answered; back in default", "finished"], within: .seconds(1))
    }

    /// LoopsAndModes.md: a `.default` timer and a `.common` one while the loop runs `.tracking`.
    @Test func theModesSampleTicksOnlyInTheCommonMode() async throws {
        let outcome = try await expectProgram("example-modes")
        #expect(outcome.lines.allSatisfy { $0 == "common-mode tick" }, "\(outcome)")
        // 100 ms at 10 ms: about 10, fewer on a loaded machine, where missed ticks collapse.
        #expect((1...11).contains(outcome.lines.count), "\(outcome)")
    }

    /// Timers.md's first sample: a repeating timer that invalidates itself after three ticks, and a
    /// one-shot timer; then `.default` is empty and the run finishes.
    @Test func theTimersSampleTicksThreeTimesThenFinishes() async throws {
        try await expectProgram("example-timers", prints: ["one-shot, then invalid", "ticks: 3"], within: .seconds(1))
    }

    /// LoopsAndModes.md: an observer of a run's entry and exit; a 5 ms timer keeps `.default`
    /// alive until it fires, then the run finishes.
    @Test func theObserverSampleSeesTheRunEnterAndExit() async throws {
        try await expectProgram(
            "example-observer", prints: ["entry in default", "exit in default"], within: .seconds(1))
    }

    /// LoopsAndModes.md: a custom mode joins the common set, and serves a `.common` timer; then it
    /// is empty and the run finishes.
    @Test func theCustomCommonModeServesTheCommonTimer() async throws {
        try await expectProgram("example-import-mode", prints: ["heartbeat"], within: .seconds(1))
    }

    /// Timers.md: a timer due at 50 ms with 30 ms of tolerance fires with one due at 70 ms.
    @Test func theToleranceSampleFiresBothTimers() async throws {
        try await expectProgram("example-tolerance", prints: ["a", "b"], within: .seconds(1))
    }

    /// Timers.md: under `.burst`, the five missed fires come one callout each, 20 ms apart.
    @Test func theBurstSampleMakesOneCalloutPerMissedFire() async throws {
        try await expectProgram("example-burst", prints: ["[20, 20, 20, 20]"], work: .milliseconds(130))
    }

    /// Timers.md: a block scheduled on a worker and cancelled before its time never runs.
    @Test func theScheduleSampleCancelsItsBlock() async throws {
        try await expectProgram("example-schedule", prints: ["cancelled: true"])
    }

    /// Timers.md: a 120 fps frame link invalidates itself after 12 frames; then the run finishes.
    @Test func theFrameLinkSampleRunsTwelveFramesThenFinishes() async throws {
        try await expectProgram("example-frame-link", prints: ["frames: 12, finished"], within: .seconds(1))
    }

    /// SourcesAndPorts.md: blocks performed on a worker, which runs `.default`.
    @Test func thePerformSampleRunsBothBlocksOnTheWorker() async throws {
        try await expectProgram(
            "example-perform", prints: ["runs on the worker thread", "runs only when the worker runs .default"])
    }

    /// SourcesAndPorts.md: a port's two messages, delivered in order in one handled source.
    @Test func thePortSampleDeliversBothMessages() async throws {
        try await expectProgram(
            "example-port", prints: ["handling reload on the loop thread", "handling flush on the loop thread"],
            within: .seconds(5))
    }

    /// A background job's result (LoopsAndModes.md, "Loop threads"): the run returns once the
    /// worker's job signalled the main loop's source (`.handledSource`), after the source ran.
    @Test func theBackgroundThreadSampleWaitsForItsJob() async throws {
        try await expectProgram(
            "example-background-thread", prints: ["the job runs on the worker thread", "the job is done"],
            within: .seconds(5))
    }

    /// SourcesAndPorts.md: a descriptor source on a pipe reads "ping", then the end of file
    /// invalidates it, and the run finishes.
    @Test func thePipeReaderReadsThenFinishes() async throws {
        try await expectProgram("example-pipe-reader", prints: ["read 4 bytes"], within: .seconds(5))
    }

    /// SourcesAndPorts.md: a signal source handles the SIGHUP the program raises.
    @Test func theSignalSampleHandlesItsSIGHUP() async throws {
        try await expectProgram("example-signal", prints: ["signal 1: reloading"], within: .seconds(5))
    }

    /// Concurrency.md, "The main queue and the main actor": a main.swift whose `Loop.main.run()`
    /// runs a main-queue block and a main-actor task. Then either `run()` returns, `.default` being
    /// empty, and the program exits; or it waits for more main-queue work until the user presses
    /// Ctrl-C, and then it must wait asleep. Run in a terminal, as a user runs it: output to a pipe
    /// would wait in the C library's buffer.
    @Test func theGuidesMainQueueProgramRunsItsWorkThenWaitsIdleOrEnds() async throws {
        let program = try RunningProgram.start("example-main-queue", output: .terminal)
        let printed = await program.waitForOutput("main actor, on the main loop\n")
        let idle = await program.cpuWhileIdle()
        program.send(SIGINT)  // Ctrl-C
        let outcome = await program.finish(within: .seconds(10))
        #expect(printed, "\(outcome)")
        #expect(outcome.lines == ["on the main loop", "main actor, on the main loop"], "\(outcome)")
        if let idle {
            #expect(idle < cpuAllowance(fixed: .zero, waiting: .seconds(1)), "\(idle) of CPU in 1 s of waiting")
            #expect(outcome.termination == .signalled(SIGINT), "\(outcome)")
        } else {
            expectQuietExit(outcome)  // run() returned: the program ended by itself
        }
    }

    /// runloop-demo's narrated tour (`make demo`), which ends by writing a trace.
    @Test func theDemoRunsItsTourAndSleepsWhileIdle() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("demo-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outcome = try await RunningProgram.run(
            "runloop-demo", arguments: ["--trace-dir", directory], within: .seconds(30))
        // Its work: 10,000 blocks in a burst, a traced stretch, a trace written as JSON and SVG.
        expectQuietExit(outcome, work: .milliseconds(100))
        #expect(outcome.lines.last?.hasSuffix("  done") == true, "\(outcome)")
        // Section 2 measures its own idle second.
        #expect(outcome.output.contains("run returned .stopped; the thread woke 1 time(s)"), "\(outcome)")
        let idleCPU = outcome.lines.first { $0.contains("CPU used by this thread during the run: ") }
        #expect(
            idleCPU?.hasSuffix(": under 1 ms") == true || idleCPU.flatMap(Self.milliseconds).map { $0 < 20 } == true,
            "\(outcome)")
        // The 30 ms stall is reported.
        #expect(
            outcome.lines.contains { $0.contains("hang monitor: ") && !$0.contains("nothing reported") }, "\(outcome)")
        for file in ["trace.json", "trace.svg"] {
            #expect(FileManager.default.fileExists(atPath: "\(directory)/\(file)"), "\(file): \(outcome)")
        }
    }

    /// The whole milliseconds a line ends with ("... 12 ms").
    static func milliseconds(_ line: String) -> Int? {
        line.hasSuffix(" ms") ? line.dropLast(3).split(separator: " ").last.flatMap { Int($0) } : nil
    }
}
