import Dispatch
import Glibc
import Testing

@testable import RunLoopKit

/// A child's standard streams as connections to this process.
@Suite(.serialized) struct ProcessStdioTests {
    /// `/bin/sh -c script` with the streams chosen.
    private func shell(
        _ script: String, input: LoopProcess.Stdio = .connection, output: LoopProcess.Stdio = .connection,
        error: LoopProcess.Stdio = .connection
    ) throws -> LoopProcess {
        try LoopProcess(
            executable: "/bin/sh", arguments: ["-c", script], standardInput: input, standardOutput: output,
            standardError: error)
    }

    /// Everything `connection` delivers until the end of its stream.
    private func readAll(_ connection: LoopConnection) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        while true {
            let chunk = try await connection.read(maxLength: 64 * 1024)
            if chunk.isEmpty { return bytes }
            bytes += chunk
        }
    }

    /// Input written before the process joins a loop reaches the child; both outputs arrive, and
    /// each stream reports `readClosed` then `closed(nil)` once the child has exited.
    @Test func aConversationOverTheThreeStreams() async throws {
        let thread = LoopThread(name: "stdio-talk")
        defer { thread.stop() }
        let process = try shell("read x; echo got:$x; echo err >&2")
        let streams = (
            try #require(process.standardInput), try #require(process.standardOutput),
            try #require(process.standardError)
        )
        let events = Recorder<String>()
        for (name, stream) in [("in", streams.0), ("out", streams.1), ("err", streams.2)] {
            stream.onEvent { _, event in events.append("\(name) \(event)") }
        }
        streams.0.enqueue("hello\n".utf8)
        thread.loop.add(process, forMode: .default)
        // In the mode, unless the whole conversation already ran on the loop's thread and the
        // stream closed (a slow test thread): a closing connection invalidates its source before
        // it leaves its modes, so one of the two holds.
        #expect(thread.loop.contains(streams.1, inMode: .default) || !streams.1.descriptorSource.isValid)

        #expect(String(decoding: try await readAll(streams.1), as: UTF8.self) == "got:hello\n")
        #expect(String(decoding: try await readAll(streams.2), as: UTF8.self) == "err\n")
        #expect(try await process.exitStatus() == .exited(0))
        let expected = ["in", "out", "err"].flatMap { ["\($0) readClosed", "\($0) closed"] }
        #expect(await eventually { expected.allSatisfy(events.events.contains) }, "\(events.events)")
        for name in ["in", "out", "err"] {
            let own = events.events.filter { $0.hasPrefix(name + " ") }
            #expect(own == ["\(name) readClosed", "\(name) closed"])
        }
    }

    /// The child's end of its input closes when the parent shuts its output: `cat` copies all of
    /// it, then sees the end of its input and exits.
    @Test func shuttingTheInputEndsTheChildsInput() async throws {
        let thread = LoopThread(name: "stdio-cat")
        defer { thread.stop() }
        let process = try LoopProcess(
            executable: "/bin/cat", standardInput: .connection, standardOutput: .connection, standardError: .null)
        thread.loop.add(process, forMode: .common)
        let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let input = try #require(process.standardInput)
        input.allowsHalfClosure = true
        input.enqueue(payload[...])
        input.shutdownOutput()
        let copied = try await readAll(try #require(process.standardOutput))
        #expect(copied == payload)
        #expect(try await process.exitStatus() == .exited(0))
    }

    /// A child writing far more than the socket holds while reading is paused waits (it cannot
    /// exit); once reading resumes every byte arrives.
    @Test func pausedReadingHoldsTheChildBackAndLosesNothing() async throws {
        let thread = LoopThread(name: "stdio-flood")
        defer { thread.stop() }
        let total = 5_000_000
        let process = try LoopProcess(
            executable: "/usr/bin/head", arguments: ["-c", "\(total)", "/dev/zero"], standardInput: .null,
            standardOutput: .connection, standardError: .null)
        let output = try #require(process.standardOutput)
        output.isReadingPaused = true
        let received = Locked((count: 0, nonZero: 0, largest: 0))
        let closed = Locked<LoopError??>(nil)
        output.onRead { _, buffer in
            let chunk = buffer.read(maxLength: buffer.count)
            received.withLock {
                $0.count += chunk.count
                $0.nonZero += chunk.count(where: { $0 != 0 })
                $0.largest = max($0.largest, chunk.count)
            }
        }
        output.onEvent { _, event in
            if case .closed(let error) = event { closed.withLock { $0 = .some(error) } }
        }
        thread.loop.add(process, forMode: .default)

        // Paused, nothing is delivered and the child, blocked on a full socket, is still there: it
        // would need a few milliseconds to write it all if nothing held it back.
        try await thread.loop.submit {}
        try await Task.sleep(for: .milliseconds(300))
        #expect(received.withLock { $0.count } == 0)
        #expect(process.status == nil)
        #expect(childState(process.pid).map { $0 != "Z" } == true)

        output.isReadingPaused = false
        #expect(try await process.exitStatus() == .exited(0))
        #expect(await eventually(within: .seconds(30)) { closed.withLock { $0 != nil } })
        let (count, nonZero, largest) = received.withLock { $0 }
        #expect(count == total)
        #expect(nonZero == 0)
        #expect(largest <= output.inputLimit)
        #expect(closed.withLock { $0 } == .some(nil))
    }

    /// Two hundred children with three connections each, one after another, and fifty never added
    /// to a loop: no descriptor left behind, no zombie.
    @Test func manySpawnsWithConnectionsLeaveNothingBehind() async throws {
        let thread = LoopThread(name: "stdio-many")
        defer { thread.stop() }
        let before = openDescriptorCount()
        var pids: [Int32] = []
        for index in 0..<200 {
            let process = try shell("read x; echo $x")
            thread.loop.add(process, forMode: .default)
            process.standardInput!.enqueue("\(index)\n".utf8)
            #expect(try await readAll(process.standardOutput!) == Array("\(index)\n".utf8))
            #expect(try await readAll(process.standardError!) == [])
            #expect(try await readAll(process.standardInput!) == [])
            #expect(try await process.exitStatus() == .exited(0))
            pids.append(process.pid)
        }
        for _ in 0..<50 {
            let process = try shell("exit 0")
            process.standardInput!.enqueue("dropped\n".utf8)
            pids.append(process.pid)
        }
        try await thread.loop.submit {}
        // Other tests open descriptors meanwhile (a thousand at a time in `ConnectionLoadTests`),
        // and let them go: a leak here would be at least one per child, and would stay.
        #expect(await eventually(within: .seconds(60)) { openDescriptorCount() < before + 50 })
        #expect(await eventually { pids.allSatisfy { childState($0) == nil } })
    }

    /// Streams not asked as connections have none; the standard descriptors the child sees are
    /// sockets only where asked.
    @Test func onlyTheStreamsAskedForAreConnections() async throws {
        let thread = LoopThread(name: "stdio-mixed")
        defer { thread.stop() }
        let script = #"readlink /proc/$$/fd/0; readlink /proc/$$/fd/1; test "$(readlink /proc/$$/fd/2)" = /dev/null"#
        let process = try shell(script, input: .null, output: .connection, error: .null)
        #expect(process.standardInput == nil && process.standardError == nil)
        thread.loop.add(process, forMode: .default)
        let lines = String(decoding: try await readAll(try #require(process.standardOutput)), as: UTF8.self)
            .split(separator: "\n")
        #expect(lines.first == "/dev/null")
        #expect(lines.last?.hasPrefix("socket:") == true)
        #expect(try await process.exitStatus() == .exited(0))
    }
}
