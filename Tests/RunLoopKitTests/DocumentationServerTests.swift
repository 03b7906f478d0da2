import Dispatch
import Glibc
import RunLoopKit
import Testing

// The code of the article "Writing a server" (Sources/RunLoopKit/RunLoopKit.docc/WritingAServer.md),
// run. Every ```swift block of the article appears here verbatim (indentation aside), in the
// functions below; scripts/check-doc-snippets.py, run by `make docs`, fails when one is missing
// here. The clients are Python's `socket` module.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

// MARK: The article's code

/// The echo server on a group of two loops; returns the group and the port.
private func echoServer() throws -> (LoopGroup, Int) {
    /// Starts an echo server on every loop of `group`, all on one port of
    /// 127.0.0.1 (`reusePort`: the kernel spreads new connections over the
    /// loops). Returns the port.
    func startEcho(on group: LoopGroup, port: Int = 0) throws -> Int {
        var port = port
        for loop in group.loops {
            let address = try SocketAddress(ipv4: "127.0.0.1", port: port)
            let listener = try LoopListener(
                address: address, reusePort: true
            ) { connection in
                // On this loop's thread, as are the connection's handlers.
                connection.onRead { connection, buffer in
                    connection.write(&buffer)  // moves the bytes: no copy
                }
            }
            loop.add(listener, forMode: .common)  // the loop keeps it
            // Port 0 asked for a free port: the other loops share it.
            port = listener.localAddress.port!
        }
        return port
    }

    let group = try LoopGroup.start(threads: 2, name: "echo")
    let port = try startEcho(on: group)
    return (group, port)
}

/// The chat room on the calling thread's loop: `listening` gets its address, then the loop runs
/// until every member has closed after SIGTERM.
private func chatRoom(_ listening: (SocketAddress) -> Void) throws {
    struct Member {
        let connection: LoopConnection
        var name: String?  // the first line the member sends
    }

    let loop = Loop.current
    let members = LoopBound([ObjectIdentifier: Member](), on: loop)
    let closing = LoopBound(false, on: loop)
    let address = try SocketAddress(ipv4: "127.0.0.1", port: 0)
    let room = try LoopListener(address: address) { connection in
        let id = ObjectIdentifier(connection)
        members.value[id] = Member(connection: connection)
        connection.onRead { _, buffer in
            while let line = buffer.readLine() {
                guard let name = members.value[id]?.name else {
                    let name = String(decoding: line, as: UTF8.self)
                    members.value[id]?.name = name
                    continue
                }
                let message = Array("\(name): ".utf8) + line + [0x0A]
                for (other, member) in members.value where other != id {
                    member.connection.enqueue(message)
                }
            }
        }
        connection.onEvent { _, event in
            guard case .closed = event else { return }  // comes once
            members.value[id] = nil
            if closing.value && members.value.isEmpty { loop.stop() }
        }
    }
    loop.add(room, forMode: .default)

    listening(room.localAddress)

    let terminate = LoopSignalSource(signal: SIGTERM) { _ in
        closing.value = true
        room.invalidate()  // no new members: the listening socket is closed
        if members.value.isEmpty { loop.stop() }
        for member in members.value.values { member.connection.close() }
    }
    loop.add(terminate, forMode: .default)
    loop.run()  // returns once every member has closed after SIGTERM
    terminate.invalidate()  // SIGTERM's previous action again
}

/// The proxy on `loop`, to `backend`.
private func proxy(on loop: Loop, to backend: SocketAddress) throws -> LoopListener {
    /// Moves what `source` reads to `sink`, reading no more while `sink`
    /// has too much queued.
    func relay(from source: LoopConnection, to sink: LoopConnection) {
        source.onRead { source, buffer in
            sink.write(&buffer)
            if !sink.isWritable { source.isReadingPaused = true }
        }
        // `sink`'s events: this direction's backpressure, and the end of both.
        sink.onEvent { _, event in
            switch event {
            case .writable: source.isReadingPaused = false  // drained
            case .closed: source.close()  // after what it has queued
            case .readClosed: break  // `sink` closes next
            }
        }
    }

    /// A proxy on `loop` from a port of 127.0.0.1 to `backend`.
    func startProxy(
        on loop: Loop, to backend: SocketAddress
    ) throws -> LoopListener {
        let address = try SocketAddress(ipv4: "127.0.0.1", port: 0)
        let front = try LoopListener(address: address) { client in
            client.isReadingPaused = true  // until the backend answers
            LoopConnection.connect(
                to: backend, on: loop, timeout: .seconds(5)
            ) { result in
                guard case .success(let server) = result else {
                    return client.close()
                }
                relay(from: client, to: server)
                relay(from: server, to: client)
                client.isReadingPaused = false
            }
        }
        loop.add(front, forMode: .common)
        return front
    }

    return try startProxy(on: loop, to: backend)
}

/// A server on `loop` whose connections close after `limit` without a byte; returns its listener.
private func idleServer(on loop: Loop, limit: Duration) throws -> LoopListener {
    /// Closes `connection` once no byte has moved either way for `limit`,
    /// and says so.
    func closeWhenIdle(_ connection: LoopConnection, after limit: Duration) {
        connection.idleTimeout = limit
        connection.onEvent { connection, event in
            guard case .closed(let error?) = event else { return }
            if error.systemError == ETIMEDOUT {
                print("\(connection.remoteAddress) was idle for \(limit)")
            }
        }
    }

    let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
        closeWhenIdle(connection, after: limit)
    }
    loop.add(listener, forMode: .common)
    return listener
}

/// Reads from `connection` within 100 ms (its peer is silent: `TimedOut`), then, once `late`
/// has made the peer send, within 5 s.
private func readWithADeadline(
    _ connection: LoopConnection, late: @Sendable () async throws -> Void
) async throws -> (timedOut: Bool, after: [UInt8]) {
    struct TimedOut: Error {}

    /// The next bytes `connection` reads, or `TimedOut` after `limit`.
    func read(
        _ connection: LoopConnection, within limit: Duration
    ) async throws -> [UInt8] {
        try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            group.addTask { try await connection.read(maxLength: 4096) }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil  // the read is cancelled below
            }
            defer { group.cancelAll() }
            guard let bytes = try await group.next()! else {
                throw TimedOut()
            }
            return bytes
        }
    }

    var timedOut = false
    do {
        _ = try await read(connection, within: .milliseconds(100))
    } catch is TimedOut {
        timedOut = true
    }
    try await late()
    return (timedOut, try await read(connection, within: .seconds(5)))
}

// MARK: Tests

/// The article's code does what the article says.
@Suite(.serialized) struct DocumentationServerTests {
    init() { printed.removeAll() }

    /// Ten Python clients at once, each answered with exactly what it sent, on one port served by
    /// both loops.
    @Test func theEchoServerAnswersEveryClient() throws {
        let (group, port) = try echoServer()
        defer { group.shutdown() }
        let (output, _) = try runPython(
            """
            import socket, sys
            port = int(sys.argv[1])
            clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
            for i, c in enumerate(clients):
                c.sendall(b"hello %d\\n" % i * 1000)
            for i, c in enumerate(clients):
                want = b"hello %d\\n" % i * 1000
                got = b""
                c.settimeout(20)
                while len(got) < len(want):
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                if got != want:
                    sys.exit("client %d got %d bytes" % (i, len(got)))
                c.close()
            print("ok")
            """, [String(port)])
        #expect(output == "ok\n")
    }

    /// Lines go to the other members under the sender's name; SIGTERM closes every member
    /// gracefully and the loop's run returns. In a child process: the signal is the process's.
    @Test func theChatRoomRelaysLinesAndClosesOnSIGTERM() async {
        await #expect(processExitsWith: .success) {
            alarm(60)  // a run that never returns ends the child (SIGALRM) instead of the suite
            let python = Locked<Result<String, any Error>?>(nil)
            let finished = DispatchSemaphore(value: 0)
            try chatRoom { address in
                let port = address.port!
                DispatchQueue.global().async {
                    let outcome = Result { try runChatMembers(port: port) }
                    python.withLock { $0 = outcome }
                    finished.signal()
                }
            }
            // The run returned: the members have been closed, and Python has seen it.
            guard finished.wait(timeout: .now() + 30) == .success else { childFailure("Python did not finish") }
            guard case .success("ok\n") = python.withLock({ $0 }) else {
                childFailure("Python: \(String(describing: python.withLock { $0 }))")
            }
            exit(0)
        }
    }

    /// 8 MiB through the proxy to the echo server and back, byte for byte: the client sends it
    /// all before it reads, so the proxy's client side fills and the proxy must pause the backend.
    @Test func theProxyCarriesBothWaysWithBackpressure() throws {
        let (group, port) = try echoServer()
        defer { group.shutdown() }
        let thread = LoopThread(name: "proxy")
        defer { thread.shutdown() }
        let front = try proxy(on: thread.loop, to: SocketAddress(ipv4: "127.0.0.1", port: port))
        let (output, _) = try runPython(
            """
            import random, socket, sys
            payload = random.Random(7).randbytes(8 << 20)
            c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            c.sendall(payload)
            c.settimeout(30)
            got = bytearray()
            while len(got) < len(payload):
                chunk = c.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
            c.close()
            print("ok" if bytes(got) == payload else "got %d bytes" % len(got))
            """, [String(front.localAddress.port!)])
        #expect(output == "ok\n")
    }

    @Test func anIdleConnectionIsClosedAndSaysSo() async throws {
        let server = LoopThread(name: "idle-server")
        defer { server.shutdown() }
        let listener = try idleServer(on: server.loop, limit: .milliseconds(100))
        let client = LoopThread(name: "idle-client")
        defer { client.shutdown() }
        // Before the connect: the server's timer starts at the accept, and the awaiting task may
        // resume from the connect much later on a machine whose cooperative threads are busy.
        let start = ContinuousClock.now
        let connection = try await LoopConnection.connect(to: listener.localAddress, on: client.loop)
        // Silent both ways: the server closes it, and the client reads the end of stream.
        #expect(try await connection.read(maxLength: 16) == [])
        #expect(ContinuousClock.now - start >= .milliseconds(100))
        #expect(await eventually { printed.count == 1 })
        #expect(printed.events == ["\(connection.localAddress) was idle for 0.1 seconds"])
    }

    @Test func aReadWithADeadlineTimesOutAndLeavesTheConnectionUsable() async throws {
        let server = try SilentServer()
        defer { server.stop() }
        let client = LoopThread(name: "deadline-client")
        defer { client.shutdown() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        let (timedOut, after) = try await readWithADeadline(connection) {
            try await server.firstConnection().write(Array("late".utf8))
        }
        #expect(timedOut)
        #expect(after == Array("late".utf8))
        connection.close()
    }
}

/// Two chat members in Python: each is told the other's line, then the script sends SIGTERM to
/// this process and both read to the end of stream. Returns what the script printed.
private func runChatMembers(port: Int) throws -> String {
    try runPython(
        """
        import os, signal, socket, sys
        port = int(sys.argv[1])
        def line(s):
            s.settimeout(20)
            got = b""
            while not got.endswith(b"\\n"):
                chunk = s.recv(1)
                if not chunk:
                    sys.exit("end of stream before a line: %r" % got)
                got += chunk
            return got
        alice = socket.create_connection(("127.0.0.1", port))
        alice.sendall(b"alice\\n")
        # Bob connects after Alice: when his line is read, Alice is a member.
        bob = socket.create_connection(("127.0.0.1", port))
        bob.sendall(b"bob\\nhi\\n")
        if line(alice) != b"bob: hi\\n":
            sys.exit("alice got something else")
        alice.sendall(b"hello\\n")
        if line(bob) != b"alice: hello\\n":
            sys.exit("bob got something else")
        os.kill(os.getppid(), signal.SIGTERM)
        for s in (alice, bob):
            if s.recv(16) != b"":
                sys.exit("more than the end of stream")
            s.close()
        print("ok")
        """, [String(port)]
    ).output
}
