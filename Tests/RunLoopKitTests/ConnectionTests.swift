import Foundation
import Testing

@testable import RunLoopKit

/// Connections over loopback TCP and Unix sockets, a server and a client loop on threads of
/// their own.
@Suite struct ConnectionTests {
    @Test(arguments: ["ipv4", "ipv6", "unix"])
    func echoesOverEveryFamily(family: String) async throws {
        let path = temporaryUnixPath("echo")
        let address =
            switch family {
            case "ipv4": try SocketAddress(ipv4: "127.0.0.1", port: 0)
            case "ipv6": try SocketAddress(ipv6: "::1", port: 0)
            default: try SocketAddress(unixPath: path)
            }
        let server = try EchoServer(address: address)
        defer { server.stop() }
        if family != "unix" { #expect(server.address.port != 0) }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        #expect(connection.remoteAddress == server.address)
        try await connection.write(Array("ping\n".utf8))
        var received: [UInt8] = []
        while received.count < 5 { received += try await connection.read(maxLength: 100) }
        #expect(received == Array("ping\n".utf8))
        connection.close()
    }

    /// A connect that fails at once (a missing Unix path: `ENOENT` from `connect` itself) completes
    /// later, on a pass of its loop in the modes it was given: never inside `connect()`, never in
    /// another mode.
    @Test func aConnectThatFailsAtOnceCompletesLaterInItsModes() {
        let (duringCall, inDefault, after) = onFreshThread { () -> (Int, Int, [Int32?]) in
            let loop = Loop.current
            let modal = Loop.Mode("modal")
            let keepsDefault = LoopTimer(after: .seconds(600)) { _ in }
            loop.add(keepsDefault, forMode: .default)
            defer { keepsDefault.invalidate() }
            let outcome = Recorder<Int32?>()
            let address = try! SocketAddress(unixPath: temporaryUnixPath("missing"))
            LoopConnection.connect(to: address, on: loop, inModes: [modal]) { result in
                if case .failure(let error) = result { outcome.append(error.systemError) }
            }
            let duringCall = outcome.count
            loop.run(mode: .default, for: .milliseconds(20))
            let inDefault = outcome.count
            _ = runLoop(loop, in: modal) { outcome.count > 0 }
            return (duringCall, inDefault, outcome.events)
        }
        #expect(duringCall == 0, "the completion ran inside connect()")
        #expect(inDefault == 0, "the completion ran in a mode it was not given")
        #expect(after == [ENOENT])
    }

    @Test func isOpenFollowsTheConnection() async throws {
        let server = try EchoServer()
        defer { server.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: server.thread.loop)
        #expect(connection.isOpen)
        let closed = Recorder<LoopError?>()
        connection.recordClosed(in: closed)
        connection.close()
        #expect(await eventually { closed.count == 1 })
        #expect(!connection.isOpen)
    }

    /// The end of stream (or close) a `writable` handler asks for after writing more than the
    /// socket takes goes after those bytes, even though the queue was empty as the event was
    /// reported (a low watermark of 0 reports it only then).
    @Test(arguments: [false, true])
    func endAskedForInTheWritableHandlerWaitsForWhatItWrote(closes: Bool) async throws {
        let received = SharedCount()
        let ended = SharedCount()
        // Small socket buffers (which turn the kernel's tuning off): a write of 4 MiB leaves most
        // of itself queued, however fast the server reads.
        let server = try EchoServer { connection in
            Platform.setOption(connection.fileDescriptor, SOL_SOCKET, SO_RCVBUF, 64 * 1024)
            connection.onRead { _, buffer in
                received.add(buffer.count)
                buffer.consume(buffer.count)
            }
            connection.onEvent { _, event in if event == .readClosed { ended.add(1) } }
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        Platform.setOption(connection.fileDescriptor, SOL_SOCKET, SO_SNDBUF, 64 * 1024)
        connection.writeWatermarks = (low: 0, high: 64 * 1024)
        let (first, last) = (4 << 20, 4 << 20)
        let wroteLast = SharedCount()
        let closed = Recorder<LoopError?>()
        connection.onEvent { connection, event in
            switch event {
            case .writable where wroteLast.value == 0:
                wroteLast.add(1)
                connection.enqueue([UInt8](repeating: 2, count: last))
                if closes { connection.close() } else { connection.shutdownOutput() }
            case .closed(let error):
                closed.append(error)
            default:
                break
            }
        }
        client.loop.perform { connection.enqueue([UInt8](repeating: 1, count: first)) }
        #expect(await eventually { ended.value == 1 })
        #expect(received.value == first + last)
        #expect(await eventually { closed.count == 1 || !closes })
        #expect(closed.events.allSatisfy { $0 == nil }, "\(closed.events)")
    }

    @Test func eventsPrintPlainly() {
        #expect("\(LoopConnection.Event.closed(nil))" == "closed")
        #expect(
            "\(LoopConnection.Event.closed(LoopError("reset by peer", systemError: ECONNRESET)))"
                == "closed: reset by peer")
        #expect("\(LoopConnection.Event.readClosed)" == "readClosed")
        #expect(String(describing: LoopConnection.Event.writable) == "writable")
    }

    @Test func clientHalfCloseIsAnsweredThenClosed() async throws {
        let server = try EchoServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let events = Recorder<LoopConnection.Event>()
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        connection.onEvent { _, event in events.append(event) }
        connection.enqueue("abc".utf8)
        connection.shutdownOutput()
        let received = try await readToEnd(connection)
        #expect(received == Array("abc".utf8))
        #expect(await eventually { events.events.contains(.closed(nil)) })
        #expect(events.events.filter { $0 == .closed(nil) }.count == 1)
    }

    @Test func serverWritesAfterThePeersFinWithHalfClosure() async throws {
        let server = try EchoServer { connection in
            connection.allowsHalfClosure = true
            connection.onEvent { connection, event in
                if event == .readClosed {
                    connection.enqueue(Array("late".utf8))
                    connection.close()
                }
            }
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        connection.allowsHalfClosure = true
        connection.enqueue("x".utf8)
        connection.shutdownOutput()
        let received = try await readToEnd(connection)
        #expect(received == Array("xlate".utf8))
    }

    @Test func peerResetIsReportedWithTheSystemError() async throws {
        let server = try EchoServer { connection in
            connection.onEvent { _, _ in }
            connection.abort()
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let closed = Recorder<LoopError?>()
        let connection: LoopConnection
        do {
            connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        } catch {
            // The reset came before the client's loop saw the connection complete: the connect
            // itself reports it.
            #expect((error as? LoopError)?.systemError == ECONNRESET)
            return
        }
        connection.onEvent { _, event in
            if case .closed(let error) = event { closed.append(error) }
        }
        connection.onRead { _, buffer in buffer.consume(buffer.count) }
        #expect(await eventually { closed.count == 1 })
        #expect(closed.events.first??.systemError == ECONNRESET)
    }

    @Test func connectRefusedGivesECONNREFUSED() async throws {
        // A port that was free a moment ago: bound, then closed.
        let probe = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
        let address = probe.localAddress
        probe.invalidate()
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let error = await #expect(throws: LoopError.self) {
            _ = try await LoopConnection.connect(to: address, on: client.loop)
        }
        #expect(error?.systemError == ECONNREFUSED)
        // The loop's other items keep working.
        let fired = Recorder<Int>()
        client.loop.add(LoopTimer(after: .milliseconds(1)) { _ in fired.append(1) }, forMode: .default)
        #expect(await eventually { fired.count == 1 })
    }

    @Test func connectTimesOutAgainstAFullBacklog() async throws {
        // Backlog 0 and never added to a loop: it accepts nothing, and once its queue is full the
        // kernel drops new handshakes.
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0), backlog: 0) { _ in }
        defer { listener.invalidate() }
        var fillers: [Int32] = []
        defer { for descriptor in fillers { close(descriptor) } }
        for _ in 0..<4 {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
            listener.localAddress.withSockaddr { _ = connect(descriptor, $0, $1) }
            fillers.append(descriptor)
        }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        // Timed on the loop's thread, where the completion runs: an awaiting task may resume much
        // later on a test machine whose cooperative threads are busy.
        let start = ContinuousClock.now
        let outcome = Locked<(error: LoopError?, elapsed: Duration)?>(nil)
        LoopConnection.connect(to: listener.localAddress, on: client.loop, timeout: .milliseconds(300)) { result in
            var error: LoopError?
            if case .failure(let failure) = result { error = failure }
            outcome.withLock { $0 = (error, ContinuousClock.now - start) }
        }
        #expect(await eventually(within: .seconds(60)) { outcome.withLock { $0 != nil } })
        let (error, elapsed) = outcome.withLock { $0 } ?? (nil, .zero)
        #expect(error?.systemError == ETIMEDOUT)
        #expect(elapsed < .seconds(10))
    }

    @Test func writesFromManyThreadsKeepEachThreadsOrder() async throws {
        let lines = Recorder<String>()
        let server = try EchoServer { connection in
            connection.onRead { _, buffer in
                while let line = buffer.readLine() { lines.append(String(decoding: line, as: UTF8.self)) }
            }
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        let threads = 4
        let perThread = 2_000
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread { connection.enqueue(Array("\(thread):\(index)\n".utf8)) }
        }
        #expect(await eventually { lines.count == threads * perThread })
        var next = [Int](repeating: 0, count: threads)
        for line in lines.events {
            let parts = line.split(separator: ":").map { Int($0)! }
            #expect(parts[1] == next[parts[0]], "thread \(parts[0]) out of order")
            next[parts[0]] = parts[1] + 1
        }
    }

    @Test func bytesBeforeOnReadAreKeptAndAWriteAfterCloseIsDropped() async throws {
        let received = Recorder<[UInt8]>()
        let accepted = Recorder<LoopConnection>()
        let server = try EchoServer { connection in accepted.append(connection) }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        try await connection.write(Array("early".utf8))
        // The echo comes back before the client sets `onRead`; it waits in the input buffer.
        #expect(await eventually { accepted.count == 1 })
        try await Task.sleep(for: .milliseconds(50))
        connection.onRead { _, buffer in received.append(buffer.read(maxLength: 100)) }
        #expect(await eventually { received.events.flatMap { $0 } == Array("early".utf8) })
        connection.close()
        connection.enqueue("dropped".utf8)
        await #expect(throws: LoopError.self) { try await connection.write(Array("too late".utf8)) }
    }

    /// `close()` with input the server never reads (some in its buffer, more in the kernel, more
    /// still arriving): the peer receives every byte of the response, then its end of stream,
    /// and no reset. The response is larger than the sockets' buffers, so that much of it is
    /// still in the kernel when the server's queue empties: a reset then would destroy it.
    @Test func closeWithUnreadInputDeliversTheWholeResponseThenTheEndOfStream() async throws {
        let response = [UInt8](repeating: 0x72, count: 8 << 20)
        let closed = Recorder<LoopError?>()
        let server = try EchoServer { connection in
            connection.recordClosed(in: closed)
            connection.onRead { connection, buffer in
                guard buffer.readLine() != nil else { return }
                connection.enqueue(response)
                connection.close()
            }
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        // The request, then more than one wake-up of the server reads, which it never reads.
        let request = Array("request\n".utf8) + [UInt8](repeating: 0x6A, count: 512 * 1024)
        connection.enqueue(request[...])
        var received = 0
        var other = 0
        while true {
            // A reset would throw here (ECONNRESET) or end the stream early.
            let bytes = try await connection.read(maxLength: 1 << 20)
            if bytes.isEmpty { break }
            received += bytes.count
            other += bytes.count(where: { $0 != 0x72 })
        }
        #expect(received == response.count)
        #expect(other == 0)
        // The client's end of stream (it closes at the server's) ends the server's wait.
        #expect(await eventually { closed.count == 1 })
        #expect(closed.events == [nil])
    }

    /// A peer that never ends its stream: the closing connection waits the linger time, then
    /// closes anyway (orderly: everything was sent). `abort()` during the wait resets at once.
    @Test func aClosingConnectionWaitsForThePeersEndOfStreamForALimitedTime() async throws {
        let closed = Recorder<LoopError?>()
        let accepted = Recorder<LoopConnection>()
        let server = try EchoServer { connection in
            accepted.append(connection)
            connection.recordClosed(in: closed)
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        // Half-closure: the client keeps its side open after the server's end of stream.
        connection.allowsHalfClosure = true
        try await connection.write(Array("ping".utf8))
        #expect(await eventually { accepted.count == 1 })
        let start = ContinuousClock.now
        accepted.events[0].close()
        #expect(try await readToEnd(connection) == Array("ping".utf8))
        // Still waiting: bytes sent now are dropped, not echoed, and do not end the wait.
        connection.enqueue("ignored".utf8)
        #expect(await eventually { closed.count == 1 })
        let waited = ContinuousClock.now - start
        #expect(waited >= LoopConnection.lingerTime - .milliseconds(50))
        #expect(closed.events == [nil])
        connection.close()
        // abort() during the wait: closed at once, with a reset, which the client's next write meets.
        let second = try await LoopConnection.connect(to: server.address, on: client.loop)
        let secondClosed = Recorder<LoopError?>()
        second.recordClosed(in: secondClosed)
        second.allowsHalfClosure = true
        try await second.write(Array("x".utf8))
        #expect(await eventually { accepted.count == 2 })
        accepted.events[1].close()
        #expect(try await readToEnd(second) == Array("x".utf8))
        accepted.events[1].abort()
        #expect(await eventually { closed.count == 2 })
        #expect(closed.events == [nil, nil])
        // Written until one write meets the reset (the first may go out before it arrives).
        #expect(
            await eventually {
                second.enqueue("after the reset".utf8)
                return secondClosed.count == 1
            })
        #expect(secondClosed.events.first! != nil, "the client met the reset")
    }

    @Test func idleTimeoutClosesWithETIMEDOUT() async throws {
        let closed = Recorder<LoopError?>()
        let server = try EchoServer { connection in
            connection.idleTimeout = .milliseconds(100)
            connection.recordClosed(in: closed)
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        #expect(await eventually { closed.count == 1 })
        #expect(closed.events.first??.systemError == ETIMEDOUT)
        let rest = try await connection.read(maxLength: 10)
        #expect(rest == [])
    }

    /// An idle limit set back to nil takes the connection's timer away: nothing wakes the loop.
    @Test func anIdleTimeoutSetBackToNilLeavesNoTimer() async throws {
        let server = try EchoServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        // An hour: the wait below runs on the shared task threads, which blocking tests may hold
        // for a minute on a loaded machine; a shorter limit could close the connection first.
        connection.idleTimeout = .seconds(3_600)
        #expect(await eventually { connection.withResidency { $0.timer } != nil })
        connection.idleTimeout = nil
        #expect(await eventually { connection.withResidency { $0.timer } == nil })
        // Still open, and served.
        try await connection.write(Array("hi".utf8))
        #expect(try await connection.read(maxLength: 10) == Array("hi".utf8))
        connection.close()
    }

    @Test func aConnectionIsServedOnlyInTheModesThatHoldIt() throws {
        let mode: Loop.Mode = "io"
        let path = temporaryUnixPath("modes")
        let reads = Recorder<[UInt8]>()
        try onFreshThread { () -> Result<Void, LoopError> in
            do throws(LoopError) {
                let loop = Loop.current
                let listener = try LoopListener(address: SocketAddress(unixPath: path)) { connection in
                    connection.onRead { _, buffer in reads.append(buffer.read(maxLength: 100)) }
                }
                loop.add(listener, forMode: mode)
                let connected = Recorder<LoopConnection>()
                LoopConnection.connect(to: listener.localAddress, on: loop, inModes: [mode]) { result in
                    connected.append(try! result.get())
                }
                while connected.count == 0 { loop.run(mode: mode, for: .milliseconds(10)) }
                let connection = connected.events[0]
                #expect(loop.contains(connection, inMode: mode))
                #expect(!loop.contains(connection, inMode: .default))
                connection.enqueue(Array("hello".utf8))
                loop.add(LoopTimer(after: .seconds(3_600)) { _ in }, forMode: .default)
                loop.run(mode: .default, for: .milliseconds(100))
                #expect(reads.count == 0)
                let deadline = ContinuousClock.now + .seconds(5)
                while reads.count == 0 && ContinuousClock.now < deadline {
                    loop.run(mode: mode, for: .milliseconds(10))
                }
                #expect(reads.events == [Array("hello".utf8)])
                connection.close()
                listener.invalidate()
            } catch { return .failure(error) }
            return .success(())
        }.get()
        #expect(access(path, F_OK) != 0)
    }
}

/// Everything the connection reads until the end of the stream.
func readToEnd(_ connection: LoopConnection) async throws -> [UInt8] {
    var received: [UInt8] = []
    while true {
        let bytes = try await connection.read(maxLength: 64 * 1024)
        if bytes.isEmpty { return received }
        received += bytes
    }
}
