import Foundation
import Glibc
import RunLoopKit
import Testing

// SourcesAndPorts.md's line reader on standard input (Examples/stdin-lines), run as a user runs it:
// with its input from a pipe, from /dev/null (as under nohup, cron or systemd), from a file, and
// from a terminal, a real pseudo-terminal of tmux that this file types into.

@Suite struct StandardInputProgramTests {
    /// Lines from a pipe, the last one without a newline; the program waits idle between them.
    @Test func linesFromAPipeArePrintedAndTheReaderWaitsIdleBetweenThem() async throws {
        let program = try RunningProgram.start("example-stdin-lines", input: .pipe)
        program.write(Array("hello\nwor".utf8))
        let idle = await program.cpuWhileIdle()  // waiting for the rest of the input
        program.write(Array("ld\nlast".utf8))
        program.closeInput()
        let outcome = await program.finish(within: .seconds(10))
        expectQuietExit(outcome)
        #expect(outcome.lines == ["1: hello", "2: world", "3: last", "3 lines"], "\(outcome)")
        #expect(idle != nil, "the reader ended before its input did: \(outcome)")
        if let idle {
            #expect(idle < cpuAllowance(fixed: .zero, waiting: .seconds(1)), "\(idle) of CPU in 1 s of waiting")
        }
    }

    /// `/dev/null` cannot be watched: the reader says so on standard error and exits with status 1,
    /// at once, instead of waiting for input that cannot come.
    @Test func standardInputFromDevNullIsRefusedClearlyAndAtOnce() async throws {
        let outcome = try await RunningProgram.run("example-stdin-lines", input: .null, within: .seconds(10))
        #expect(!outcome.hung, "\(outcome)")
        #expect(outcome.termination == .exited(1), "\(outcome)")
        #expect(outcome.output.isEmpty, "\(outcome)")
        #expect(outcome.errorOutput.hasPrefix("cannot read standard input: "), "\(outcome)")
        #expect(outcome.wall < .seconds(2), "\(outcome)")
    }

    /// A regular file (`program < file`) is refused the same way.
    @Test func standardInputFromAFileIsRefusedClearly() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stdin-lines-\(getpid()).txt").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("one\n".utf8)))
        defer { unlink(path) }
        let outcome = try await RunningProgram.run("example-stdin-lines", input: .file(path), within: .seconds(10))
        #expect(!outcome.hung, "\(outcome)")
        #expect(outcome.termination == .exited(1), "\(outcome)")
        #expect(outcome.errorOutput.hasPrefix("cannot read standard input: "), "\(outcome)")
    }

    /// In a terminal: the user types two lines, the reader answers each as it comes and waits idle
    /// meanwhile; Ctrl-D ends the input.
    @Test(.enabled(if: Tmux.path != nil, "tmux cannot run here (make deps installs it): no terminal to type into"))
    func linesTypedInATerminalAreAnsweredUntilCtrlD() async throws {
        let tmux = Tmux()
        do {
            try await typeLines(into: tmux)
        } catch {
            Issue.record(error)
        }
        await tmux.end()
    }

    /// The terminal test's steps, in `tmux`'s server.
    private func typeLines(into tmux: Tmux) async throws {
        let program = try RunningProgram.path(of: "example-stdin-lines")
        // Under a shell that prints the program's exit status when it ends: tmux's own record of a
        // dead pane's status was missing now and then (tmux 3.3a). The program runs in the
        // terminal's foreground, as when typed at a prompt.
        try await tmux.run([
            "new-session", "-d", "-s", "lines", "-x", "80", "-y", "24", "/bin/sh", "-c",
            "\"$0\"; echo \"exit status $?\"; sleep 60", program,
        ])
        guard let shell = try await Int32(tmux.run(["display-message", "-p", "-t", "lines", "#{pane_pid}"]).trimmed),
            let pid = await childProcess(of: shell)
        else {
            Issue.record("no pane process")
            return
        }
        // The measuring window: the reader waits for the user to type.
        let before = RunningProgram.cpuTime(of: pid)
        try await Task.sleep(for: .seconds(1))
        let idle = before.flatMap { before in RunningProgram.cpuTime(of: pid).map { $0 - before } }
        try await tmux.run(["send-keys", "-t", "lines", "hello", "Enter"])
        let first = try await tmux.screenShows("1: hello")
        try await tmux.run(["send-keys", "-t", "lines", "world", "Enter"])
        let second = try await tmux.screenShows("2: world")
        try await tmux.run(["send-keys", "-t", "lines", "C-d"])
        let ended = try await tmux.screenShows("2 lines")
        let exited = try await tmux.screenShows("exit status 0")
        let screen = try await tmux.screen()

        #expect(first && second && ended, "screen:\n\(screen)")
        #expect(exited, "screen:\n\(screen)")
        #expect(idle != nil, "the reader ended early; screen:\n\(screen)")
        if let idle {
            #expect(idle < cpuAllowance(fixed: .zero, waiting: .seconds(1)), "\(idle) of CPU in 1 s of waiting")
        }
    }
}

/// The first child process of `parent` to appear (within 10 s): /proc/<pid>/stat's fourth field is
/// the parent's id.
private func childProcess(of parent: Int32) async -> Int32? {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry),
                let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == parent { return pid }
        }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return nil
}

/// A tmux server of this test's own (its own socket, no configuration file), driven through the
/// command line.
private struct Tmux {
    /// The tmux executable on PATH, if it runs (`tmux -V`).
    static let path: String? = {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        let candidates = directories.map { "\($0)/tmux" }
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }),
            let outcome = try? RunningProgram.start(path: path, name: "tmux", arguments: ["-V"]).finishBlocking(),
            outcome.termination == .exited(0)
        else { return nil }
        return path
    }()

    let socket = "runloopkit-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    /// Runs `tmux -L socket -f /dev/null arguments...`; returns its standard output, or throws if
    /// it failed.
    @discardableResult
    func run(_ arguments: [String]) async throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment["TMUX"] = nil  // a test run inside tmux still gets a server of its own
        let outcome = try await RunningProgram.start(
            path: Tmux.path!, name: "tmux", arguments: ["-L", socket, "-f", "/dev/null"] + arguments,
            environment: environment
        ).finish(within: .seconds(10))
        guard outcome.termination == .exited(0), !outcome.hung else {
            throw LoopError("tmux \(arguments) failed: \(outcome)")
        }
        return outcome.output
    }

    /// The pane's screen and history.
    func screen() async throws -> String { try await run(["capture-pane", "-p", "-S", "-", "-t", "lines"]) }

    /// Waits (up to 10 s) until the screen shows `text`; returns whether it does.
    func screenShows(_ text: String) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while try await !screen().contains(text) {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Ends the server and the programs of its panes.
    func end() async { _ = try? await run(["kill-server"]) }
}

extension String {
    fileprivate var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
