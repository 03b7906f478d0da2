import Dispatch
import Glibc
import RunLoopKit
import Testing

// Code samples of the DocC article WorkOffTheLoop.md
// (Sources/RunLoopKit/RunLoopKit.docc/WorkOffTheLoop.md), run: these blocks appear here verbatim
// (indentation aside); DocumentationTests.swift holds its others. Tests of the same calls that the
// article no longer shows stay beside them. scripts/check-doc-snippets.py, run by `make docs`,
// fails when a block of the article is in none of the files its table names for it.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// Stand-ins for a blocking call, what uses its result, and a log.
private func loadTemplate(named name: String) throws -> String { "<\(name)>" }
private func render(_ template: String) { print("rendering \(template)") }
private func report(_ error: any Error) { print("no template: \(error)") }
private func log(_ text: String) { print(text) }

// MARK: Work pools

private func workPool() {
    let disk = LoopWorkPool(name: "disk", threads: 2)
    let loop = Loop.current
    disk.run({ try loadTemplate(named: "index") }, completingOn: loop, inModes: [.default]) { result in
        switch result {  // on the loop's thread, when it runs .default
        case .success(let template): render(template)
        case .failure(let error): report(error)
        }
    }
    runLoop(loop, in: .default) { printed.count == 1 }

    // Both threads busy and one more piece of work queued: the pool is saturated.
    let busy = [occupy(disk), occupy(disk)]
    disk.run({}, completingOn: sink) { _ in }
    let m = disk.metrics
    if m.queued > 0 && m.running == disk.threadCount {
        log("disk pool saturated: \(m.queued) waiting, average delay \(m.averageQueueDelay ?? .zero)")
    }
    for (gate, _) in busy { gate.signal() }
    disk.shutdown()
}

// MARK: Child processes

/// Compresses the file at `path` with the Guide's gzip child, on `loop`.
private func gzip(_ path: String, on loop: Loop) async throws -> LoopProcess.Status {
    let child = try LoopProcess(
        executable: "/usr/bin/gzip", arguments: ["-9", path],
        standardInput: .null)
    child.onExit { process, status in
        print("gzip \(process.pid): \(status)")  // .exited(0), or .signalled(SIGKILL)
    }
    loop.add(child, forMode: .common)

    // or, from async code:
    let status = try await child.exitStatus()
    return status
}

/// sort over its standard streams, on the calling thread's loop; returns how the run ended.
private func sortOverStandardStreams() throws -> Loop.RunResult {
    let loop = Loop.current
    let child = try LoopProcess(
        executable: "/usr/bin/sort", standardInput: .connection,
        standardOutput: .connection, standardError: .inherit)
    child.standardOutput!.onRead { _, buffer in
        while let line = buffer.readLine() { print(String(decoding: line, as: UTF8.self)) }
    }
    child.standardInput!.enqueue("pear\napple\n".utf8)
    child.standardInput!.shutdownOutput()  // sort sees the end of its input
    loop.add(child, forMode: .common)
    let result = loop.run(mode: .default, for: .seconds(10))
    // prints "apple", then "pear"; result is .finished: once sort has exited and
    // its streams have closed, nothing is left in .default
    return result
}

/// The build step ended by a timeout, with what it started: runs to the end and returns.
private func buildStepTimeout() throws {
    let loop = Loop.current
    let step = try LoopProcess(
        executable: "sh", arguments: ["-c", "echo compiling; sleep 1000 & wait"],
        standardInput: .null, standardOutput: .connection, newProcessGroup: true)
    var status: LoopProcess.Status?
    var outputClosed = false
    step.standardOutput!.onRead(
        loop.isolated { _, buffer in
            while let line = buffer.readLine() { print("step: \(String(decoding: line, as: UTF8.self))") }
        })
    step.standardOutput!.onEvent(
        loop.isolated { _, event in
            if case .closed = event { outputClosed = true }
        })
    step.onExit(loop.isolated { _, exit in status = exit })
    let timeout = loop.schedule(after: .seconds(1)) {
        step.signalGroup(SIGKILL)  // the shell and its sleep: nothing holds the output any more
    }
    loop.add(step, forMode: .default)
    while status == nil || !outputClosed {
        loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: true)
    }
    timeout.cancel()  // the step may have ended before its time
    print("step: \(status!), output closed")  // step: signalled(9), output closed
}

// MARK: A supervisor

/// What the supervisor did: with an executable that does not exist, then with a child that kills
/// itself at once.
private struct SupervisorOutcome: Sendable {
    var missingExecutable: [String] = []
    var starts = 0
    var gaveUpOn: LoopProcess.Status?
}

private func supervisor() -> SupervisorOutcome {
    final class Supervisor {
        let loop: Loop
        let executable: String
        let arguments: [String]
        var maxRestarts = 5
        var firstDelay = Duration.milliseconds(200)
        private(set) var starts = 0
        private var child: LoopProcess?
        var onGiveUp: (LoopProcess.Status) -> Void = { _ in }

        init(loop: Loop, executable: String, arguments: [String]) {
            self.loop = loop
            self.executable = executable
            self.arguments = arguments
        }

        /// Loop thread.
        func start() {
            do {
                let child = try LoopProcess(executable: executable, arguments: arguments)
                starts += 1
                child.onExit(loop.isolated { [weak self] _, status in self?.exited(status) })
                loop.add(child, forMode: .common)
                self.child = child
            } catch {
                print("cannot start \(executable): \(error)")  // error.systemError: ENOENT, EACCES, …
            }
        }

        /// Asks the child to end; it is not restarted.
        func stop() {
            maxRestarts = 0
            child?.signal(SIGTERM)
        }

        private func exited(_ status: LoopProcess.Status) {
            child = nil
            guard status != .exited(0) else { return }  // a clean exit is not restarted
            guard starts <= maxRestarts else { return onGiveUp(status) }
            let delay = firstDelay * (1 << min(starts - 1, 5))  // 200 ms, 400 ms, … 6.4 s
            loop.add(LoopTimer(after: delay, loop.isolated { [weak self] _ in self?.start() }), forMode: .common)
        }
    }

    let supervisor = Supervisor(loop: Loop.current, executable: "/usr/local/bin/worker", arguments: [])
    supervisor.start()
    Loop.current.run()

    // Nothing was started, so .default was empty and run() returned at once.
    var outcome = SupervisorOutcome()
    outcome.missingExecutable = printed.events
    let crashing = Supervisor(loop: Loop.current, executable: "/bin/sh", arguments: ["-c", "kill -KILL $$"])
    crashing.maxRestarts = 3
    crashing.firstDelay = .milliseconds(5)
    crashing.onGiveUp = { outcome.gaveUpOn = $0 }
    crashing.start()
    runLoop(Loop.current, in: .default) { outcome.gaveUpOn != nil }
    outcome.starts = crashing.starts
    return outcome
}

// MARK: Tests

/// The chapter's code does what the chapter says. Serialized: the snippets share `printed`.
@Suite(.serialized) struct GuideWorkTests {
    init() { printed.removeAll() }

    @Test func aPoolRunsTheWorkAndSaysWhenItIsSaturated() async {
        await awaitFreshThread { workPool() }
        #expect(printed.events.first == "rendering <index>")
        #expect(printed.events.dropFirst().first?.hasPrefix("disk pool saturated: 1 waiting, average delay ") == true)
        #expect(printed.count == 2)
    }

    @Test func gzipCompressesAFile() async throws {
        let path = "/tmp/rlk-\(getpid())-guide-\(UInt32.random(in: 0...UInt32.max)).txt"
        let file = fopen(path, "w")
        fputs(String(repeating: "compressible ", count: 1_000), file)
        fclose(file)
        defer {
            unlink(path)
            unlink(path + ".gz")
        }
        let thread = LoopThread(name: "gzip")
        defer { thread.stop() }
        #expect(try await gzip(path, on: thread.loop) == .exited(0))
        #expect(access(path + ".gz", F_OK) == 0)
        #expect(access(path, F_OK) != 0)  // gzip replaced the file
        #expect(await eventually { printed.count == 1 })
        #expect(printed.events.first?.hasPrefix("gzip ") == true)
        #expect(printed.events.first?.hasSuffix(": exited(0)") == true)
    }

    @Test func sortReadsItsInputAndWritesItsOutputOverConnections() async throws {
        let result = await awaitFreshThread { Result { try sortOverStandardStreams() } }
        #expect(try result.get() == .finished)
        #expect(printed.events == ["apple", "pear"])
    }

    /// The timeout kills the step's whole group: the program finishes, in about the timeout.
    @Test func aTimeoutEndsTheBuildStepAndWhatItStarted() async throws {
        // Timed on the program's thread: the test's own task may wait for one of Swift
        // concurrency's threads on a loaded machine.
        let (outcome, took) = await awaitFreshThread { () -> (String?, Duration) in
            let started = ContinuousClock.now
            do {
                try buildStepTimeout()
                return (nil, ContinuousClock.now - started)
            } catch {
                return ("\(error)", ContinuousClock.now - started)
            }
        }
        #expect(outcome == nil)
        #expect(printed.events == ["step: compiling", "step: signalled(9), output closed"])
        #expect(took < .seconds(5))
    }

    @Test func theSupervisorRestartsACrashingChildThenGivesUp() async {
        let outcome = await awaitFreshThread { supervisor() }
        #expect(outcome.missingExecutable.count == 1)
        #expect(outcome.missingExecutable.first?.hasPrefix("cannot start /usr/local/bin/worker: ") == true)
        // Started once, restarted three times, then given up on.
        #expect(outcome.starts == 4)
        #expect(outcome.gaveUpOn == .signalled(SIGKILL))
    }
}
