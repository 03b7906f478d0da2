import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

@Suite(.serialized) struct ProcessTests {
    /// `/bin/sh -c script`, its descriptors on /dev/null.
    private func shell(_ script: String) throws -> LoopProcess {
        try LoopProcess(
            executable: "/bin/sh", arguments: ["-c", script], standardInput: .null, standardOutput: .null,
            standardError: .null)
    }

    /// Blocks until `pid` has exited, without reaping it.
    private func waitUntilExited(_ pid: Int32) {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
    }

    /// Waits up to 10 s for the child `pid`, just killed, to be reaped by the library.
    private func isReapedSoon(_ pid: Int32) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while childState(pid) != nil && ContinuousClock.now < deadline { usleep(1_000) }
        return childState(pid) == nil
    }

    @Test func exitCodesAndSignals() async throws {
        let thread = LoopThread(name: "proc-status")
        defer { thread.stop() }
        let cases: [(String, LoopProcess.Status)] = [
            ("exit 0", .exited(0)), ("exit 3", .exited(3)), ("kill -TERM $$", .signalled(SIGTERM)),
        ]
        for (script, expected) in cases {
            let process = try shell(script)
            thread.loop.add(process, forMode: .common)
            #expect(try await process.exitStatus() == expected, "\(script)")
            #expect(process.status == expected)
            #expect(try await process.exitStatus() == expected)  // again, at once
        }
        let sleeper = try shell("exec sleep 30")
        thread.loop.add(sleeper, forMode: .default)
        sleeper.signal(SIGKILL)
        #expect(try await sleeper.exitStatus() == .signalled(SIGKILL))
        sleeper.signal(SIGKILL)  // reaped: does nothing
    }

    /// The exit is delivered on the loop's thread, only in a mode that holds the process.
    @Test func onExitRunsOnTheLoopThreadInItsModes() throws {
        let process = try shell("exit 5")
        waitUntilExited(process.pid)
        let events = onFreshThread { () -> [String] in
            let loop = Loop.current
            var events: [String] = []
            let log = UncheckedBox { events.append($0) }
            process.onExit { _, status in log.value("\(status) on loop thread: \(loop.isCurrentThread)") }
            loop.add(process, forMode: .default)
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .tracking)
            loop.run(mode: .tracking, for: .milliseconds(100))
            keepAlive.invalidate()
            log.value("tracking ended")
            runLoop(loop, in: .default) { events.count == 2 }
            return events
        }
        #expect(events == ["tracking ended", "exited(5) on loop thread: true"])
    }

    /// A process added to a loop and dropped still delivers its exit; then it is released.
    @Test func aDroppedProcessKeepsWorkingThenIsReleased() async throws {
        let thread = LoopThread(name: "proc-dropped")
        defer { thread.stop() }
        let exited = DispatchSemaphore(value: 0)
        weak var watched: LoopProcess?
        try {
            let process = try shell("exit 9")
            process.onExit { _, status in if status == .exited(9) { exited.signal() } }
            thread.loop.add(process, forMode: .default)
            watched = process
        }()
        #expect(exited.wait(timeout: .now() + 10) == .success)
        try await thread.loop.submit {}  // the exit callout has returned
        #expect(watched == nil)
    }

    /// Removed from every mode and dropped while its child runs: released at once, and the child
    /// is reaped by the library when it exits.
    @Test func aRemovedAndDroppedProcessIsReleased() throws {
        let thread = LoopThread(name: "proc-removed")
        defer { thread.stop() }
        weak var watched: LoopProcess?
        let pid = try { () throws -> Int32 in
            let process = try shell("exec sleep 30")
            thread.loop.add(process, forMode: .default)
            thread.loop.add(process, forMode: .tracking)
            #expect(thread.loop.contains(process, inMode: .default))
            thread.loop.remove(process, forMode: .default)
            thread.loop.remove(process, forMode: .tracking)
            #expect(!thread.loop.contains(process, inMode: .tracking))
            watched = process
            return process.pid
        }()
        #expect(watched == nil)
        kill(pid, SIGKILL)
        #expect(isReapedSoon(pid))
    }

    /// The loop ends before the child: waiters learn so; the child can still be signalled, and is
    /// reaped once the process is dropped.
    @Test func aLoopEndingFailsTheWaiters() async throws {
        let thread = LoopThread(name: "proc-ended")
        var process: LoopProcess? = try shell("exec sleep 30")
        thread.loop.add(process!, forMode: .default)
        let waiting = Task { [process] in try await process!.exitStatus() }
        thread.stop()
        await #expect(throws: LoopError.self) { try await waiting.value }
        let pid = process!.pid
        process!.signal(SIGKILL)
        process = nil
        #expect(isReapedSoon(pid))
    }

    /// A dropped process whose loop ends while its child runs is released with the loop, and the
    /// child is reaped once it exits.
    @Test func aDroppedProcessGoesWithItsLoop() throws {
        let thread = LoopThread(name: "proc-teardown")
        weak var watched: LoopProcess?
        let pid = try { () throws -> Int32 in
            let process = try shell("exec sleep 30")
            thread.loop.add(process, forMode: .default)
            watched = process
            return process.pid
        }()
        thread.stop()
        #expect(watched == nil)
        kill(pid, SIGKILL)
        #expect(isReapedSoon(pid))
    }

    /// Another child of this process, started with plain posix_spawn, is still the caller's to
    /// wait for after a LoopProcess has run and exited.
    @Test func otherChildrenAreLeftAlone() async throws {
        var other = pid_t()
        let words: [String] = ["/bin/sh", "-c", "exit 7"]
        let argv = words.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        #expect(posix_spawn(&other, "/bin/sh", nil, nil, argv, environ) == 0)
        waitUntilExited(other)

        let thread = LoopThread(name: "proc-other")
        defer { thread.stop() }
        let process = try shell("exit 0")
        thread.loop.add(process, forMode: .default)
        #expect(try await process.exitStatus() == .exited(0))

        var status: Int32 = 0
        #expect(waitpid(other, &status, 0) == other)
        #expect((status >> 8) & 0xff == 7)
    }

    /// Only the standard descriptors reach the child; `.null` puts /dev/null on them.
    @Test func onlyTheStandardDescriptorsAreInherited() async throws {
        let inheritable = open("/dev/null", O_RDONLY)  // no O_CLOEXEC
        #expect(inheritable > 2)
        defer { close(inheritable) }
        let thread = LoopThread(name: "proc-fds")
        defer { thread.stop() }
        let script = """
            test ! -e /proc/$$/fd/\(inheritable) &&
            test "$(readlink /proc/$$/fd/0)" = /dev/null && test "$(readlink /proc/$$/fd/2)" = /dev/null
            """
        let process = try shell(script)
        thread.loop.add(process, forMode: .default)
        #expect(try await process.exitStatus() == .exited(0))
    }

    @Test func environmentAndWorkingDirectory() async throws {
        let thread = LoopThread(name: "proc-env")
        defer { thread.stop() }
        let process = try LoopProcess(
            executable: "/bin/sh", arguments: ["-c", #"test "$GREETING" = hello && test "$(pwd)" = /tmp"#],
            environment: ["GREETING": "hello", "PATH": "/usr/bin:/bin"], workingDirectory: "/tmp")
        thread.loop.add(process, forMode: .default)
        #expect(try await process.exitStatus() == .exited(0))
    }

    /// Bad input is a thrown LoopError carrying errno; nothing is started.
    @Test func badInputThrowsWithTheSystemError() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("rlk-not-executable-\(getpid())")
        try Data("echo no\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let cases: [(String, String?, Int32)] = [
            ("/nonexistent/rlk-tool", nil, ENOENT),
            (file.path, nil, EACCES),
            ("/bin/sh", "/nonexistent/directory", ENOENT),
            ("/bin/sh", file.path, ENOTDIR),
        ]
        for (executable, directory, code) in cases {
            let error = #expect(throws: LoopError.self) {
                try LoopProcess(executable: executable, arguments: ["-c", "exit 0"], workingDirectory: directory)
            }
            #expect(error?.systemError == code, "\(executable) in \(directory ?? "."): \(error?.message ?? "")")
        }
    }

    /// A thousand children, one after another: no descriptor and no zombie left behind.
    @Test func thousandSpawnsLeaveNothingBehind() async throws {
        let thread = LoopThread(name: "proc-many")
        defer { thread.stop() }
        let before = openDescriptorCount()
        var pids: [Int32] = []
        for _ in 0..<1000 {
            let process = try shell("exit 0")
            thread.loop.add(process, forMode: .default)
            #expect(try await process.exitStatus() == .exited(0))
            pids.append(process.pid)
        }
        try await thread.loop.submit {}
        // Other tests open descriptors meanwhile: a leak here would be one per child.
        #expect(openDescriptorCount() < before + 50)
        #expect(pids.filter(isZombieChild).isEmpty)
    }
}
