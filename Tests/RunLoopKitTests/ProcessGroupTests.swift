import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// A child in a process group of its own, signalled as a whole; executables found in `PATH`.
@Suite(.serialized) struct ProcessGroupTests {
    /// A shell, in a group of its own, that starts `sleep 1000` in the background, prints the
    /// sleep's pid on its standard output (a connection) and then `tail` (e.g. `wait`).
    private func shellWithSleep(then tail: String) throws -> LoopProcess {
        try LoopProcess(
            executable: "/bin/sh", arguments: ["-c", "sleep 1000 & echo $!; \(tail)"], standardInput: .null,
            standardOutput: .connection, standardError: .null, newProcessGroup: true)
    }

    /// The first line of `connection`'s output, as a pid.
    private func readPid(_ connection: LoopConnection) async throws -> Int32 {
        var bytes: [UInt8] = []
        while !bytes.contains(UInt8(ascii: "\n")) {
            let chunk = try await connection.read(maxLength: 64)
            if chunk.isEmpty { break }
            bytes += chunk
        }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return try #require(Int32(text), "no pid in \(text)")
    }

    /// `shellWithSleep(then: "wait")`, added to `loop`: the process, its output's events, and the
    /// pid of its sleep.
    private func startShellWaitingForItsSleep(on loop: Loop) async throws -> (LoopProcess, Recorder<String>, Int32) {
        let process = try shellWithSleep(then: "wait")
        let output = try #require(process.standardOutput)
        let events = Recorder<String>()
        output.onEvent { _, event in events.append("\(event)") }
        loop.add(process, forMode: .default)
        return (process, events, try await readPid(output))
    }

    /// Whether `pid` no longer runs (gone, or a zombie nobody reaped yet).
    private func hasEnded(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return true }
        return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
    }

    /// The shell waits for its `sleep`, which holds the output pipe: signalling the group ends
    /// both, so the exit and the output's `closed` both arrive.
    @Test func signallingTheGroupEndsTheGrandchildAndClosesTheOutput() async throws {
        let thread = LoopThread(name: "group-kill")
        defer { thread.stop() }
        let (process, events, sleeper) = try await startShellWaitingForItsSleep(on: thread.loop)
        defer { kill(sleeper, SIGKILL) }
        #expect(!hasEnded(sleeper))

        process.signalGroup(SIGKILL)
        #expect(try await process.exitStatus() == .signalled(SIGKILL))
        #expect(await eventually { events.events.contains("closed") }, "\(events.events)")
        #expect(await eventually { hasEnded(sleeper) })
    }

    /// Signalling the child alone leaves the grandchild holding the pipe: no `closed` (what the
    /// group is for).
    @Test func signallingTheChildAloneLeavesTheOutputOpen() async throws {
        let thread = LoopThread(name: "child-kill")
        defer { thread.stop() }
        let (process, events, sleeper) = try await startShellWaitingForItsSleep(on: thread.loop)
        defer { kill(sleeper, SIGKILL) }

        process.signal(SIGKILL)
        #expect(try await process.exitStatus() == .signalled(SIGKILL))
        #expect(await !eventually(within: .milliseconds(300)) { events.events.contains("closed") })
        #expect(!hasEnded(sleeper))
        // Delivered: the group is no longer signalled, even though the sleep is still in it.
        process.signalGroup(SIGKILL)
        #expect(await !eventually(within: .milliseconds(300)) { hasEnded(sleeper) })
        kill(sleeper, SIGKILL)
        #expect(await eventually { events.events.contains("closed") }, "\(events.events)")
    }

    /// Once the exit was delivered, `signalGroup` does nothing: the group's id is the reaped
    /// child's pid, which another process may have by now.
    @Test func afterTheExitWasDeliveredTheGroupIsNotSignalled() async throws {
        let thread = LoopThread(name: "group-after-exit")
        defer { thread.stop() }
        let process = try shellWithSleep(then: "exit 4")
        let output = try #require(process.standardOutput)
        thread.loop.add(process, forMode: .default)
        let sleeper = try await readPid(output)
        defer { kill(sleeper, SIGKILL) }
        #expect(try await process.exitStatus() == .exited(4))
        process.signalGroup(SIGTERM)
        #expect(await !eventually(within: .milliseconds(300)) { hasEnded(sleeper) })
    }

    /// Without `newProcessGroup` the child stays in this process's group.
    @Test func theChildLeadsItsOwnGroupOnlyWhenAsked() async throws {
        let thread = LoopThread(name: "group-ids")
        defer { thread.stop() }
        for own in [false, true] {
            let process = try LoopProcess(
                executable: "/bin/sh", arguments: ["-c", "cut -d' ' -f5 /proc/$$/stat"], standardInput: .null,
                standardOutput: .connection, newProcessGroup: own)
            thread.loop.add(process, forMode: .default)
            let group = try await readPid(try #require(process.standardOutput))
            #expect(group == (own ? process.pid : getpgrp()), "newProcessGroup: \(own)")
            #expect(try await process.exitStatus() == .exited(0))
        }
    }

    // MARK: PATH

    /// A directory of its own holding `rlk-shell`, a link to `/bin/sh` (a link, not a script
    /// written here: a file just written may still be open for writing in a child another test
    /// is starting, and executing it would fail with `ETXTBSY`), and `rlk-plain`, a file that is
    /// not executable.
    private func scriptDirectory() throws -> String {
        let directory = "/tmp/rlk-\(getpid())-path-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        #expect(symlink("/bin/sh", directory + "/rlk-shell") == 0)
        try "#!/bin/sh\nexit 0\n".write(toFile: directory + "/rlk-plain", atomically: false, encoding: .utf8)
        chmod(directory + "/rlk-plain", 0o644)
        return directory
    }

    @Test func aBareNameIsFoundInPath() async throws {
        let thread = LoopThread(name: "path-sh")
        defer { thread.stop() }
        let process = try LoopProcess(executable: "sh", arguments: ["-c", "exit 3"])
        thread.loop.add(process, forMode: .default)
        #expect(try await process.exitStatus() == .exited(3))
    }

    /// The `PATH` searched is the child's: the given environment's, else this process's.
    @Test func thePathSearchedIsTheGivenEnvironments() async throws {
        let directory = try scriptDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let thread = LoopThread(name: "path-env")
        defer { thread.stop() }
        let process = try LoopProcess(
            executable: "rlk-shell", arguments: ["-c", "exit 7"], environment: ["PATH": "/nonexistent:" + directory])
        thread.loop.add(process, forMode: .default)
        #expect(try await process.exitStatus() == .exited(7))
        // Not in this process's PATH.
        #expect(throws: LoopError.self) { try LoopProcess(executable: "rlk-shell") }
        // An environment without PATH searches glibc's default, /bin:/usr/bin.
        let shell = try LoopProcess(executable: "sh", arguments: ["-c", "exit 5"], environment: ["A": "b"])
        thread.loop.add(shell, forMode: .default)
        #expect(try await shell.exitStatus() == .exited(5))
    }

    @Test func aMissingNameThrowsENOENTAtOnce() throws {
        do {
            _ = try LoopProcess(executable: "rlk-no-such-program-\(UInt32.random(in: 0...UInt32.max))")
            Issue.record("started a program that does not exist")
        } catch {
            #expect(error.systemError == ENOENT)
        }
    }

    @Test func aNameFoundOnlyAsANonExecutableFileThrowsEACCES() throws {
        let directory = try scriptDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try LoopProcess(executable: "rlk-plain", environment: ["PATH": directory])
            Issue.record("started a file that is not executable")
        } catch {
            #expect(error.systemError == EACCES)
        }
        // A directory of that name is not executable either.
        try FileManager.default.createDirectory(atPath: directory + "/rlk-dir", withIntermediateDirectories: false)
        #expect(throws: LoopError.self) {
            try LoopProcess(executable: "rlk-dir", environment: ["PATH": directory])
        }
    }
}
