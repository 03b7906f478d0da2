import Glibc
import RunLoopKit
import Testing

// Code samples of the DocC article WritingAServer.md
// (Sources/RunLoopKit/RunLoopKit.docc/WritingAServer.md), run: these blocks appear here verbatim
// (indentation aside); DocumentationServerTests.swift holds its others. Each block is here in a
// function of its own. Tests of the same calls that the article no longer shows stay beside them.
// scripts/check-doc-snippets.py, run by `make docs`, fails when a block of the article is in none
// of the files its table names for it.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// The line-echo server; returns its thread and the port its listener got.
private func echoServer() throws -> (server: LoopThread, port: Int) {
    let server = LoopThread(name: "echo")
    let address = try SocketAddress(ipv4: "127.0.0.1", port: 0)  // 0: any free port
    let listener = try LoopListener(address: address) { connection in
        // On the server loop's thread, in the listener's modes.
        connection.idleTimeout = .seconds(30)
        connection.onRead { connection, buffer in
            while let line = buffer.readLine() {
                connection.enqueue(line + [0x0A])
            }
            // A peer that sends without a newline stalls at `inputLimit` (1 MiB by default).
        }
        connection.onEvent { connection, event in
            switch event {
            case .readClosed: break  // the peer's FIN: flushed and closed next
            case .closed(let error?): print("\(connection.remoteAddress): \(error)")
            case .closed(nil), .writable: break
            }
        }
    }
    server.loop.add(listener, forMode: .common)
    print("listening on \(listener.localAddress)")  // the port the system picked
    // The loop holds the listener and its connections: no reference needs to be kept.
    return (server, listener.localAddress.port!)
}

/// The client, run against the server listening on `port` of 127.0.0.1.
private func echoClient(port: Int) async throws {
    /// Sends three lines to the echo server on `port` of 127.0.0.1 and prints the answers.
    func runClient(port: Int) async throws {
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let address = try SocketAddress(ipv4: "127.0.0.1", port: port)
        do {
            let connection = try await LoopConnection.connect(
                to: address, on: client.loop, timeout: .seconds(5))
            for word in ["one", "two", "three"] {
                try await connection.write(Array("\(word)\n".utf8))  // waits below the high watermark
            }
            connection.shutdownOutput()  // FIN after the flush; reading goes on
            var answer: [UInt8] = []
            while true {
                let bytes = try await connection.read(maxLength: 4096)
                if bytes.isEmpty { break }  // the server closed its side
                answer += bytes
            }
            print(String(decoding: answer, as: UTF8.self))
        } catch let error as LoopError where error.systemError == ECONNREFUSED {
            print("nobody listens on \(address)")
        }
    }

    try await runClient(port: port)  // the port the server printed
}

/// Echoes what `connection` reads without buffering more than the high watermark.
private func echoWithBackpressure(_ connection: LoopConnection) {
    connection.onRead { connection, buffer in
        connection.write(&buffer)  // moves the blocks
        if !connection.isWritable { connection.isReadingPaused = true }
    }
    connection.onEvent { connection, event in
        if event == .writable { connection.isReadingPaused = false }
    }
}

/// Answers pipelined requests, one line each, with replies far larger than them.
private func serveRequests(_ connection: LoopConnection) {
    connection.pausesReadingWhileUnwritable = true  // no reading while replies wait to go out
    connection.onRead { connection, buffer in
        while connection.isWritable, let request = buffer.readLine() {
            connection.enqueue(reply(to: request))
        }
    }
}

/// The reply to `request`: 1 MiB, the request and a newline first.
private func reply(to request: [UInt8]) -> [UInt8] {
    let head = request + [0x0A]
    return head + [UInt8](repeating: UInt8(ascii: "."), count: (1 << 20) - head.count)
}

/// Answers each line with itself.
private func handle(_ line: [UInt8], from connection: LoopConnection) {
    connection.enqueue(line + [0x0A])
}

/// Serves lines, refusing one longer than the input limit.
private func serveLines(_ connection: LoopConnection) {
    connection.onRead { connection, buffer in
        while let line = buffer.readLine() { handle(line, from: connection) }
        if buffer.count >= connection.inputLimit {
            connection.enqueue(Array("ERROR line too long\n".utf8))
            connection.close()
        }
    }
}

/// Stops `listener` and serves `busyConnections` alone, in a mode of their own, until they have
/// closed; `loop` is the calling thread's.
private func drain(_ listener: LoopListener, busyConnections: [LoopConnection], on loop: Loop) {
    let draining: Loop.Mode = "draining"
    listener.invalidate()  // stop accepting; the socket is closed
    for connection in busyConnections {  // the ones with a response in flight
        loop.add(connection, forMode: draining)
        connection.close()  // after the flush
    }
    while busyConnections.contains(where: { loop.contains($0, inMode: draining) }) {
        loop.run(mode: draining, for: .milliseconds(100))
    }
}

/// Reports each connection `listener` sheds.
private func reportShedding(of listener: LoopListener) {
    listener.onShed { listener, error in
        // The client was accepted and closed at once: error.systemError is EMFILE (or ENFILE),
        // and the message names the client.
        print("shed \(listener.shedConnections) so far: \(error.message)")
    }
}

// MARK: Tests

/// The bytes the backpressure test sends, over and over.
private let pattern = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) }

/// Whether `bytes`, found at `offset` of a stream of `pattern`s, are the pattern's bytes there.
private func matchesPattern(_ bytes: [UInt8], at offset: Int) -> Bool {
    var checked = 0
    while checked < bytes.count {
        let start = (offset + checked) % pattern.count
        let length = min(pattern.count - start, bytes.count - checked)
        guard bytes[checked..<checked + length] == pattern[start..<start + length] else { return false }
        checked += length
    }
    return true
}

/// What the draining test saw on the server's thread.
private struct DrainOutcome: Sendable {
    var busyOutputBeforeDrain = 0
    var requestsAfterDrain: [String] = []
    var drainingAfterwards: Loop.RunResult?
    var listenerRefuses = false
    var idleStillInCommon = false
    var busyClientGotEverything = false
    var idleServedAfterwards = false
}

/// A server on the calling thread's loop with two clients on `client`: one asks for a large
/// report, which is still queued when the server drains; the other is idle and sends a line just
/// before the drain.
private func drainScenario(client: LoopThread) throws -> DrainOutcome {
    let loop = Loop.current
    let report = [UInt8](repeating: 0x2A, count: 16 << 20)
    let requests = Recorder<String>()
    var accepted: [LoopConnection] = []
    var busyConnections: [LoopConnection] = []
    let listener = try LoopListener(
        address: SocketAddress(ipv4: "127.0.0.1", port: 0),
        loop.isolated { connection in
            accepted.append(connection)
            connection.onRead(
                loop.isolated { connection, buffer in
                    while let line = buffer.readLine() {
                        let request = String(decoding: line, as: UTF8.self)
                        requests.append(request)
                        if request == "report" {
                            busyConnections.append(connection)
                            connection.enqueue(report)
                        } else {
                            connection.enqueue(line + [0x0A])
                        }
                    }
                })
        })
    loop.add(listener, forMode: .common)

    let clients = Recorder<LoopConnection>()
    for _ in 0..<2 {
        LoopConnection.connect(to: listener.localAddress, on: client.loop) { result in
            if case .success(let connection) = result { clients.append(connection) }
        }
    }
    guard waitUntil({ clients.count == 2 }) else { return DrainOutcome() }
    let (busyClient, idleClient) = (clients.events[0], clients.events[1])
    // The busy client does not read yet: most of the report stays queued on the server.
    busyClient.enqueue(Array("report\n".utf8))
    runLoop(loop, in: .default) { accepted.count == 2 && requests.count == 1 }

    // The idle client's line reaches the server's socket (a write on the loop's thread goes to
    // the socket at once), but the server does not run meanwhile.
    let pinged = Locked(false)
    let echoed = Locked<[UInt8]>([])
    idleClient.onRead { _, buffer in echoed.withLock { $0 += buffer.read(maxLength: buffer.count) } }
    client.loop.perform {
        idleClient.enqueue(Array("ping\n".utf8))
        pinged.withLock { $0 = true }
    }
    _ = waitUntil { pinged.withLock { $0 } }

    var outcome = DrainOutcome()
    outcome.busyOutputBeforeDrain = busyConnections.first?.outputBufferedBytes ?? 0
    let received = Locked(0)
    let busyClientClosed = Locked(false)
    busyClient.onRead { _, buffer in
        received.withLock { $0 += buffer.count }
        buffer.consume(buffer.count)
    }
    busyClient.onEvent { _, event in
        if case .closed(nil) = event { busyClientClosed.withLock { $0 = true } }
    }
    drain(listener, busyConnections: busyConnections, on: loop)
    outcome.requestsAfterDrain = requests.events
    outcome.drainingAfterwards = loop.run(mode: "draining", for: .zero)
    outcome.listenerRefuses = waitUntil { refusesConnections(listener.localAddress) }
    let idleServer = accepted.first { $0 !== busyConnections.first }
    outcome.idleStillInCommon = idleServer.map { loop.contains($0, inMode: .common) } ?? false
    outcome.busyClientGotEverything = waitUntil {
        received.withLock { $0 } == report.count && busyClientClosed.withLock { $0 }
    }
    outcome.idleServedAfterwards = runLoop(loop, in: .default) { echoed.withLock { $0 } == Array("ping\n".utf8) }
    idleClient.close()
    if let idleServer { runLoop(loop, in: .default) { !loop.contains(idleServer, inMode: .common) } }
    return outcome
}

/// Runs `body` with its awaits resumed on a loop thread of its own. The suite runs blocking tests
/// beside these, and they can keep the few shared concurrency threads busy for longer than the
/// echo server's 30 s idle timeout (seen under ThreadSanitizer), which then closes the
/// connection under the client.
private func onOwnExecutor(_ body: () async throws -> Void) async throws {
    let thread = LoopThread(name: "guide-server-test")
    defer { thread.stop() }
    try await withTaskExecutorPreference(thread.loop) { try await body() }
}

/// The chapter's code does what the chapter says. Serialized: the snippets share `printed`.
@Suite(.serialized) struct GuideServerTests {
    init() { printed.removeAll() }

    @Test func theEchoServerAnswersTheClient() async throws {
        let (server, port) = try echoServer()
        defer { server.stop() }
        try await onOwnExecutor { try await echoClient(port: port) }
        // The server closed after the client's FIN without an error: nothing else printed.
        #expect(printed.events == ["listening on 127.0.0.1:\(port)", "one\ntwo\nthree\n"])
    }

    @Test func theEchoServerPrintsAReset() async throws {
        let (server, port) = try echoServer()
        defer { server.stop() }
        let client = LoopThread(name: "resetting-client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(
            to: SocketAddress(ipv4: "127.0.0.1", port: port), on: client.loop)
        try await connection.write(Array("one\n".utf8))
        var answer: [UInt8] = []
        while answer.count < 4 { answer += try await connection.read(maxLength: 4 - answer.count) }
        #expect(answer == Array("one\n".utf8))
        connection.abort()
        #expect(await eventually { printed.count == 2 })
        #expect(printed.events.last?.hasPrefix("\(connection.localAddress): ") == true)
    }

    @Test func theClientSaysWhenNobodyListens() async throws {
        // A port that was free a moment ago: bound, then closed.
        let probe = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
        let port = probe.localAddress.port!
        probe.invalidate()
        try await onOwnExecutor { try await echoClient(port: port) }
        #expect(printed.events == ["nobody listens on 127.0.0.1:\(port)"])
    }

    @Test func aLineLongerThanTheInputLimitIsRefused() throws {
        let server = try EchoServer { connection in
            connection.inputLimit = 1024
            serveLines(connection)
        }
        defer { server.stop() }
        let (output, _) = try runPython(
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"hello\\n" + b"x" * 5000)
            s.settimeout(20)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            sys.stdout.write(data.decode())
            """, [String(server.address.port ?? 0)])
        #expect(output == "hello\nERROR line too long\n")
    }

    /// 200 pipelined requests, each answered with 1 MiB, to a client that reads slowly: every
    /// reply arrives, in order, and the server's output, seen each time its loop goes to sleep,
    /// never holds more than the high watermark and one reply.
    @Test func pipelinedRequestsWithLargeRepliesKeepTheOutputBounded() throws {
        let accepted = Locked<LoopConnection?>(nil)
        let mostQueued = Locked(0)
        let server = try EchoServer { connection in
            accepted.withLock { $0 = connection }
            serveRequests(connection)
        }
        defer { server.stop() }
        let sampler = LoopObserver(activities: .beforeWaiting) { _, _ in
            let queued = accepted.withLock { $0?.outputBufferedBytes ?? 0 }
            mostQueued.withLock { $0 = max($0, queued) }
        }
        server.thread.loop.add(sampler, forMode: .default)
        try runPython(BackpressureTests.slowClient, [String(server.address.port ?? 0), "200", String(1 << 20)])
        #expect(mostQueued.withLock { $0 } > 0)
        #expect(mostQueued.withLock { $0 } <= LoopConnection.defaultWriteWatermarks.high + (1 << 20))
    }

    @Test func backpressurePausesReadingUntilTheOutputDrains() async throws {
        let accepted = Locked<LoopConnection?>(nil)
        let server = try EchoServer { connection in
            accepted.withLock { $0 = connection }
            echoWithBackpressure(connection)
        }
        defer { server.stop() }
        let client = LoopThread(name: "backpressure-client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        func serverPaused() -> Bool { accepted.withLock { $0?.isReadingPaused ?? false } }

        // The client writes and does not read: the echo backs up into the server's output queue
        // until the server pauses its reading.
        var sent = 0
        while !serverPaused() && sent < 256 << 20 {
            try await client.loop.submit {
                var buffer = LoopBuffer(pattern)
                connection.write(&buffer)
            }
            sent += pattern.count
            _ = await eventually { connection.outputBufferedBytes < pattern.count || serverPaused() }
        }
        #expect(serverPaused())
        // Bounded by the high watermark plus what one read brought in, not by what was sent.
        let queued = accepted.withLock { $0?.outputBufferedBytes ?? 0 }
        #expect(queued < LoopConnection.defaultWriteWatermarks.high + 2 * LoopConnection.defaultInputLimit)

        // The client reads: the server's queue drains, it reports .writable, reading resumes and
        // every byte comes back in order.
        let received = Locked(0)
        let intact = Locked(true)
        connection.onRead { _, buffer in
            let bytes = buffer.read(maxLength: buffer.count)
            received.withLock { count in
                if !matchesPattern(bytes, at: count) { intact.withLock { $0 = false } }
                count += bytes.count
            }
        }
        #expect(await eventually(within: .seconds(60)) { received.withLock { $0 } == sent })
        #expect(intact.withLock { $0 })
        #expect(await eventually { !serverPaused() })
        connection.close()
    }

    /// "Out of descriptors": with no descriptor left, a client is shed and `onShed` prints it,
    /// in a child process whose descriptor table is full.
    @Test func aShedClientIsReported() async {
        await #expect(processExitsWith: .success) {
            let server = try LoopThread.start(name: "shed")
            let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
            reportShedding(of: listener)
            server.loop.add(listener, forMode: .default)
            // Three clients: another thread of the process may let a descriptor go after the table
            // was filled (one client served, and its read waited forever, in a loaded run), so one
            // of them being served is allowed, and a served client's read gives up after 5 s.
            let clients = (0..<3).map { _ in
                let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                return descriptor
            }
            _ = exhaustDescriptors()
            var shed = 0
            for client in clients {
                guard connectSocket(client, to: listener.localAddress) else {
                    childFailure("connect: errno \(errno)")
                }
                var byte: UInt8 = 0
                let count = read(client, &byte, 1)
                if count == 0 || (count < 0 && errno == ECONNRESET) { shed += 1 }
            }
            guard shed >= 2 else { childFailure("\(shed) of \(clients.count) clients shed") }
            let deadline = ContinuousClock.now + .seconds(10)
            while printed.count == 0 && ContinuousClock.now < deadline { usleep(1_000) }
            let line = printed.events.first ?? ""
            guard line.hasPrefix("shed 1 so far: the connection from 127.0.0.1:"), line.contains("errno 24") else {
                childFailure("printed \(printed.events)")
            }
            exit(0)
        }
    }

    @Test func drainingServesTheBusyConnectionsAlone() async throws {
        let client = LoopThread(name: "drain-client")
        defer { client.stop() }
        let outcome = try await awaitFreshThread { Result { try drainScenario(client: client) } }.get()
        // The report was still queued when the drain began.
        #expect(outcome.busyOutputBeforeDrain > 0)
        // The idle connection's line waited: not served while the loop ran `draining`.
        #expect(outcome.requestsAfterDrain == ["report"])
        #expect(outcome.drainingAfterwards == .finished)
        #expect(outcome.listenerRefuses)
        #expect(outcome.idleStillInCommon)
        #expect(outcome.busyClientGotEverything)
        #expect(outcome.idleServedAfterwards)
    }
}

// MARK: Shared state and backpressure

@Suite(.serialized) struct GuideServerExampleTests {
    /// The chat server: a line from one member reaches the other members, not its sender; a member
    /// that leaves is forgotten.
    @Test func aChatLineReachesTheOtherMembers() async throws {
        let chat = LoopThread(name: "chat")
        let members = LoopBound([ObjectIdentifier: LoopConnection](), on: chat.loop)
        let room = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
            let id = ObjectIdentifier(connection)
            members.value[id] = connection
            connection.onRead { _, buffer in
                while let line = buffer.readLine() {
                    for (other, member) in members.value where other != id {
                        member.enqueue(line + [0x0A])
                    }
                }
            }
            connection.onEvent { _, event in
                if case .closed = event { members.value[id] = nil }
            }
        }
        chat.loop.add(room, forMode: .common)
        defer { chat.stop() }

        let clients = LoopThread(name: "members")
        defer { clients.stop() }
        let alice = try await LoopConnection.connect(to: room.localAddress, on: clients.loop)
        let bob = try await LoopConnection.connect(to: room.localAddress, on: clients.loop)
        let carol = try await LoopConnection.connect(to: room.localAddress, on: clients.loop)
        #expect(await memberCount(of: members, becomes: 3))
        try await alice.write(Array("hello\n".utf8))
        for member in [bob, carol] {
            var line: [UInt8] = []
            while !line.contains(0x0A) { line += try await member.read(maxLength: 64) }
            #expect(line == Array("hello\n".utf8))
        }
        carol.close()
        #expect(await memberCount(of: members, becomes: 2))
        try await bob.write(Array("bye\n".utf8))
        var line: [UInt8] = []
        while !line.contains(0x0A) { line += try await alice.read(maxLength: 64) }
        #expect(line == Array("bye\n".utf8))
        alice.close()
        bob.close()
    }

    /// The proxy: 8 MiB through it to an echo backend and back, byte for byte, with a client that
    /// reads only after it has written everything, so both directions fill and pause.
    @Test func theProxyCarriesBothWaysWithBackpressure() async throws {
        let (backendThread, backendPort) = try echoBackend()
        defer { backendThread.stop() }

        /// Moves what `source` reads to `sink`, pausing `source` while `sink` holds too much.
        func pipe(from source: LoopConnection, to sink: LoopConnection) {
            source.onRead { source, buffer in
                sink.write(&buffer)
                if !sink.isWritable { source.isReadingPaused = true }
            }
            sink.onEvent { _, event in
                switch event {
                case .writable: source.isReadingPaused = false
                case .closed: source.close()
                case .readClosed: break
                }
            }
        }

        let proxy = LoopThread(name: "proxy")
        let backend = try SocketAddress(ipv4: "127.0.0.1", port: backendPort)
        let front = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { client in
            client.isReadingPaused = true  // until the backend answers
            LoopConnection.connect(to: backend, on: proxy.loop) { result in
                guard case .success(let server) = result else { return client.close() }
                pipe(from: client, to: server)
                pipe(from: server, to: client)
                client.isReadingPaused = false
            }
        }
        proxy.loop.add(front, forMode: .common)
        defer { proxy.stop() }

        let user = LoopThread(name: "user")
        defer { user.stop() }
        let connection = try await LoopConnection.connect(to: front.localAddress, on: user.loop)
        let payload = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        enqueue(payload, on: connection)  // all of it at once: nobody reads yet
        var echoed: [UInt8] = []
        while echoed.count < payload.count {
            let bytes = try await connection.read(maxLength: 1 << 20)
            if bytes.isEmpty { break }
            echoed += bytes
        }
        #expect(echoed.count == payload.count)
        #expect(echoed == payload)
        connection.close()
    }
}

/// A plain echo server on a thread of its own, for the proxy to reach.
private func echoBackend() throws -> (LoopThread, Int) {
    let thread = LoopThread(name: "backend")
    let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
        connection.onRead { connection, buffer in
            connection.write(&buffer)
            if !connection.isWritable { connection.isReadingPaused = true }
        }
        connection.onEvent { connection, event in
            if event == .writable { connection.isReadingPaused = false }
        }
    }
    thread.loop.add(listener, forMode: .common)
    return (thread, listener.localAddress.port!)
}

/// Whether the chat's member count reaches `count` within 10 s (read on the chat's loop).
private func memberCount(
    of members: LoopBound<[ObjectIdentifier: LoopConnection]>, becomes count: Int
) async -> Bool {
    // Checked once more after the deadline: under a loaded run this task's thread may be held
    // for many seconds between two looks (one wait outlasted a 10 s limit under ThreadSanitizer).
    let deadline = ContinuousClock.now + .seconds(30)
    while true {
        if (try? await members.loop.submit { members.value.count }) == count { return true }
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
}

/// Queues `bytes` without waiting for them to drain (the synchronous `write`).
private func enqueue(_ bytes: [UInt8], on connection: LoopConnection) { connection.enqueue(bytes) }
