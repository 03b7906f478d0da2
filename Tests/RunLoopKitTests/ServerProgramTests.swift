import Foundation
import Glibc
import RunLoopKit
import Testing

// The documentation's servers as programs (Examples/), run as child processes: WritingAServer.md's
// chat room on `Loop.main`, which this file's clients talk to and end with SIGTERM, and its
// line-echo server with its own client.

/// A blocking TCP client of 127.0.0.1, as `nc` would be: reads give up after 10 s.
private final class LineClient {
    let descriptor: Int32
    private var received: [UInt8] = []
    private(set) var ended = false

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var limit = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard try connectSocket(descriptor, to: SocketAddress(ipv4: "127.0.0.1", port: port)) else {
            let failure = errno
            close(descriptor)
            throw LoopError("connect to port \(port) failed", systemError: failure)
        }
    }

    deinit { close(descriptor) }

    func send(_ line: String) {
        let bytes = Array("\(line)\n".utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The next line, without its newline; nil at the end of the stream or after 10 s.
    func readLine() -> String? {
        while true {
            if let newline = received.firstIndex(of: 0x0A) {
                defer { received.removeSubrange(...newline) }
                return String(decoding: received[..<newline], as: UTF8.self)
            }
            guard fill() else { return nil }
        }
    }

    /// Reads until the server's end of stream; false if it did not come within 10 s.
    func readToEnd() -> Bool {
        while fill() {}
        return ended
    }

    private func fill() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        if count == 0 { ended = true }
        guard count > 0 else { return false }
        received += buffer[..<count]
        return true
    }
}

@Suite struct ServerProgramTests {
    /// WritingAServer.md's chat room and its shutdown, on `Loop.main` in `run()`: two members talk,
    /// the server waits idle, then SIGTERM closes each member gracefully and `run()` returns once
    /// the last one has gone.
    @Test func theChatRoomServesItsMembersWaitsIdleAndShutsDownOnSIGTERM() async throws {
        let program = try RunningProgram.start("example-chat-server")
        guard await program.waitForOutput("\n"),
            let port = program.output.split(separator: " ").last.flatMap({ Int($0.dropLast()) })
        else {
            let outcome = await program.finish(within: .zero)
            Issue.record("no port printed: \(outcome)")
            return
        }
        let alice = try LineClient(port: port)
        alice.send("alice")  // a member's first line is its name
        let bob = try LineClient(port: port)
        bob.send("bob")
        bob.send("hi")
        let toAlice = alice.readLine()
        alice.send("hello")
        let toBob = bob.readLine()

        let idle = await program.cpuWhileIdle()  // two members connected, nobody talking

        let terminated = ContinuousClock.now
        program.send(SIGTERM)
        // Each member is closed after its output: the end of the stream, then it ends its side.
        let aliceEnded = alice.readToEnd()
        let bobEnded = bob.readToEnd()
        shutdown(alice.descriptor, Int32(SHUT_WR))
        shutdown(bob.descriptor, Int32(SHUT_WR))
        let outcome = await program.finish(within: .seconds(30))

        #expect(toAlice == "bob: hi", "\(outcome)")
        #expect(toBob == "alice: hello", "\(outcome)")
        #expect(idle != nil, "the server ended early: \(outcome)")
        if let idle {
            #expect(idle < cpuAllowance(fixed: .zero, waiting: .seconds(1)), "\(idle) of CPU in 1 s of waiting")
        }
        #expect(aliceEnded && bobEnded, "\(outcome)")
        expectQuietExit(outcome)
        // From the signal to the program's exit as its waiter thread saw it, not to this task's
        // next turn, which a loaded run (sanitizers) may hold back for seconds.
        let exited = program.started + outcome.wall
        #expect(exited - terminated < .seconds(10), "shut down in time: \(outcome)")
        #expect(outcome.lines == ["chat room on port \(port)"], "\(outcome)")
    }

    /// WritingAServer.md, "A line-echo server and its client": the server on a `LoopThread` and the
    /// client that sends it three lines, awaited at the top level of main.swift.
    @Test func theGuidesEchoServerAnswersItsClient() async throws {
        let outcome = try await expectProgram("example-echo", within: .seconds(5))
        #expect(outcome.lines.first?.hasPrefix("listening on 127.0.0.1:") == true, "\(outcome)")
        #expect(Array(outcome.lines.dropFirst()) == ["one", "two", "three", ""], "\(outcome)")
    }

    /// WritingAServer.md, "Connections as an async sequence": `for await` over a handler-less
    /// listener's connections at the top level of main.swift, three clients of the program's
    /// own, and the sequence's end when they invalidate the listener.
    @Test func theAsyncServerGreetsThreeClientsThenEnds() async throws {
        let outcome = try await expectProgram("example-async-server", within: .seconds(10))
        #expect(
            outcome.lines == ["hello, client 1", "hello, client 2", "hello, client 3", "served 3"], "\(outcome)")
    }
}
