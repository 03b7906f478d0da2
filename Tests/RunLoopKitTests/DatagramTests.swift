import Foundation
import Glibc
import RunLoopKit
import Synchronization
import Testing

/// Datagram sockets against Python's `socket` module in a child process: UDP over IPv4 and IPv6
/// and Unix datagrams, each thread's order kept over 100,000 datagrams, truncation, and a socket
/// its caller dropped.
@Suite struct DatagramTests {
    /// A Python script that sends `datagram` (its third argument) to the address in its first two
    /// (family, host or path, port) and prints the reply; a Unix client binds a path of its own.
    static let echoClient = """
        import socket, sys
        family, where, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
        if family == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(sys.argv[5])
            target = where
        else:
            s = socket.socket(socket.AF_INET6 if family == "ipv6" else socket.AF_INET, socket.SOCK_DGRAM)
            target = (where, port)
        s.settimeout(10)
        s.sendto(sys.argv[4].encode(), target)
        reply, sender = s.recvfrom(65536)
        print(reply.decode())
        print(sender if family == "unix" else sender[1])
        """

    /// A socket on a loop thread of its own that sends each datagram back reversed.
    private func echoServer(bindingTo address: SocketAddress) throws -> (LoopThread, LoopDatagramSocket) {
        let thread = LoopThread(name: "datagram-echo")
        let socket = try LoopDatagramSocket(bindingTo: address)
        socket.onReceive { socket, bytes, sender in socket.send(bytes.reversed(), to: sender) }
        thread.loop.add(socket, forMode: .default)
        return (thread, socket)
    }

    @Test func ipv4EchoWithPython() throws {
        let (thread, socket) = try echoServer(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        defer { thread.stop() }
        let port = try #require(socket.localAddress.port)
        #expect(port != 0)
        let lines = try runPython(Self.echoClient, ["ipv4", "127.0.0.1", "\(port)", "hello"]).output.split(
            separator: "\n")
        #expect(lines.first == "olleh")
        #expect(lines.last == "\(port)")
        socket.invalidate()
    }

    @Test func ipv6EchoWithPython() throws {
        let (thread, socket) = try echoServer(bindingTo: SocketAddress(ipv6: "::1", port: 0))
        defer { thread.stop() }
        let port = try #require(socket.localAddress.port)
        #expect(socket.localAddress.description == "[::1]:\(port)")
        let lines = try runPython(Self.echoClient, ["ipv6", "::1", "\(port)", "datagram"]).output.split(separator: "\n")
        #expect(lines.first == "margatad")
        socket.invalidate()
    }

    @Test func unixEchoWithPython() throws {
        let path = temporaryUnixPath("dgram")
        let client = temporaryUnixPath("dgram-client")
        defer { unlink(client) }
        let (thread, socket) = try echoServer(bindingTo: SocketAddress(unixPath: path))
        defer { thread.stop() }
        #expect(socket.localAddress.description == "unix:\(path)")
        let lines = try runPython(Self.echoClient, ["unix", path, "0", "abc", client]).output.split(separator: "\n")
        #expect(lines.first == "cba")
        #expect(lines.last.map(String.init) == path)
        socket.invalidate()
        // The socket's path goes with it.
        #expect(access(path, F_OK) != 0)
    }

    /// Four threads send 25,000 numbered datagrams each over a Unix datagram socket (which the
    /// kernel does not drop from: a full receiver holds the sender back); Python receives them and
    /// checks each thread's numbers come in order, with none missing.
    @Test func fourThreadsKeepTheirOrder() throws {
        let pythonPath = temporaryUnixPath("dgram-order-peer")
        let path = temporaryUnixPath("dgram-order")
        defer { unlink(pythonPath) }
        let peer = try PythonPeer(
            """
            import socket, struct, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            s.bind(sys.argv[1])
            s.settimeout(20)
            print("ready", flush=True)
            last = [-1] * 4
            received = disorder = 0
            while True:
                data = s.recv(64)
                if data == b"end":
                    break
                thread, number = struct.unpack("<II", data[:8])
                if number != last[thread] + 1:
                    disorder += 1
                last[thread] = number
                received += 1
            print(received, disorder, *last)
            """, [pythonPath])
        #expect(try peer.readLine() == "ready")
        let thread = LoopThread(name: "datagram-order")
        defer { thread.stop() }
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(unixPath: path))
        socket.sendQueueLimit = 100_000
        thread.loop.add(socket, forMode: .default)
        let target = try SocketAddress(unixPath: pythonPath)
        let senders = (0..<4).map { index in
            Thread {
                for number in 0..<25_000 {
                    var datagram = [UInt8](repeating: 0, count: 32)
                    withUnsafeBytes(of: UInt32(index).littleEndian) { datagram.replaceSubrange(0..<4, with: $0) }
                    withUnsafeBytes(of: UInt32(number).littleEndian) { datagram.replaceSubrange(4..<8, with: $0) }
                    socket.send(datagram, to: target)
                }
            }
        }
        for sender in senders { sender.start() }
        #expect(waitUntil(within: .seconds(30)) { socket.queuedDatagrams == 0 && senders.allSatisfy(\.isFinished) })
        // The end marker waits behind everything queued before it: awaited, it is never dropped.
        // Sent from a task on a loop thread of its own: this test holds one of Swift concurrency's
        // few threads until Python exits, and other tests may hold the rest for longer than
        // Python's 20 s wait, so a task needing one of them could start too late.
        let sent = Locked(false)
        let runner = LoopThread(name: "datagram-order-end")
        defer { runner.stop() }
        Task(executorPreference: runner.loop) {
            try await socket.send(Array("end".utf8), to: target)
            sent.withLock { $0 = true }
        }
        let summary = try peer.finish().split(separator: " ").map {
            Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(socket.droppedDatagrams == 0)
        #expect(summary == [100_000, 0, 24_999, 24_999, 24_999, 24_999])
        #expect(waitUntil { sent.withLock { $0 } })
        socket.invalidate()
    }

    /// Past `sendQueueLimit`, `send(_:to:)` drops new datagrams and counts them; what was queued
    /// before the socket joined a loop goes once it does.
    @Test func aFullSendQueueDropsAndCounts() throws {
        let thread = LoopThread(name: "datagram-drops")
        defer { thread.stop() }
        let receiver = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        let got = Locked<[UInt8]>([])
        receiver.onReceive { _, bytes, _ in got.withLock { $0.append(bytes[0]) } }
        thread.loop.add(receiver, forMode: .default)
        let sender = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        sender.sendQueueLimit = 8
        for number in 0..<20 { sender.send([UInt8(number)], to: receiver.localAddress) }
        #expect(sender.queuedDatagrams == 8)
        #expect(sender.droppedDatagrams == 12)
        thread.loop.add(sender, forMode: .default)
        #expect(waitUntil { got.withLock { $0.count } == 8 })
        #expect(got.withLock { $0 } == Array(0..<8))
        #expect(sender.queuedDatagrams == 0)
        sender.invalidate()
        receiver.invalidate()
    }

    /// A datagram longer than `maximumDatagramSize` is reported (`EMSGSIZE`) and counted, not
    /// passed on cut short; the next one arrives whole.
    @Test func truncatedDatagramsAreReported() async throws {
        let thread = LoopThread(name: "datagram-truncation")
        defer { thread.stop() }
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        socket.maximumDatagramSize = 100
        thread.loop.add(socket, forMode: .default)
        let port = try #require(socket.localAddress.port)
        try runPython(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"x" * 500, ("127.0.0.1", int(sys.argv[1])))
            s.sendto(b"y" * 50, ("127.0.0.1", int(sys.argv[1])))
            """, ["\(port)"])
        let first = await result { try await socket.receive() }
        let error = try #require(first.failure as? LoopError)
        #expect(error.systemError == EMSGSIZE)
        #expect(error.message.contains("500 bytes"))
        let (bytes, from) = try await socket.receive()
        #expect(bytes == [UInt8](repeating: UInt8(ascii: "y"), count: 50))
        #expect(from.description.hasPrefix("127.0.0.1:"))
        #expect(socket.truncatedDatagrams == 1)

        // The same through the handlers.
        let errors = Locked<[LoopError]>([])
        let sizes = Locked<[Int]>([])
        socket.onError { _, error in errors.withLock { $0.append(error) } }
        socket.onReceive { _, bytes, _ in sizes.withLock { $0.append(bytes.count) } }
        try runPython(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"x" * 101, ("127.0.0.1", int(sys.argv[1])))
            s.sendto(b"y" * 100, ("127.0.0.1", int(sys.argv[1])))
            """, ["\(port)"])
        #expect(await eventually { sizes.withLock { $0 } == [100] })
        #expect(errors.withLock { $0.map(\.systemError) } == [EMSGSIZE])
        #expect(socket.truncatedDatagrams == 2)
        socket.invalidate()
    }

    /// A socket whose caller kept no reference goes on receiving and sending while it is in a
    /// mode; once it invalidates itself it is released.
    @Test func aDroppedSocketKeepsWorkingInItsMode() throws {
        let thread = LoopThread(name: "datagram-dropped")
        defer { thread.stop() }
        weak var weakSocket: LoopDatagramSocket?
        let port: Int
        do {
            let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
            socket.onReceive { socket, bytes, sender in
                socket.send(bytes.reversed(), to: sender)
                if bytes == Array("last".utf8) { socket.invalidate() }
            }
            thread.loop.add(socket, forMode: .common)
            port = try #require(socket.localAddress.port)
            weakSocket = socket
        }
        #expect(weakSocket != nil)
        let first = try runPython(Self.echoClient, ["ipv4", "127.0.0.1", "\(port)", "first"]).output
        #expect(first.hasPrefix("tsrif\n"))
        let last = try runPython(Self.echoClient, ["ipv4", "127.0.0.1", "\(port)", "last"]).output
        #expect(last.hasPrefix("tsal\n"))
        #expect(waitUntil { weakSocket == nil })
    }

    /// `receive()` waiting when the socket is invalidated throws; a cancelled one throws
    /// `CancellationError` at once and takes no datagram.
    @Test func waitingReceivesEnd() async throws {
        let thread = LoopThread(name: "datagram-waits")
        defer { thread.stop() }
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        thread.loop.add(socket, forMode: .default)
        let cancelled = await cancelWhileWaiting(
            unblock: { socket.invalidate() }, { try await socket.receive() })
        #expect(cancelled.threwCancellation)
        #expect(!cancelled.unblocked)
        // The datagram sent after the cancel goes to the next call.
        let probe = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        thread.loop.add(probe, forMode: .default)
        try await probe.send([9], to: socket.localAddress)
        #expect(try await socket.receive().bytes == [9])

        let waiting = Task { try await socket.receive() }
        try await Task.sleep(for: .milliseconds(50))
        socket.invalidate()
        let outcome = await result { try await waiting.value }
        #expect((outcome.failure as? LoopError)?.message.contains("invalidated") == true)
        let after = await result { try await socket.receive() }
        #expect(after.failure is LoopError)
        probe.invalidate()
    }

    /// DatagramSockets.md: the echo service and the async client.
    @Test func guideEchoService() async throws {
        let printed = Locked<[LoopError]>([])
        func print(_ error: LoopError) { printed.withLock { $0.append(error) } }
        let thread = LoopThread(name: "datagrams")
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        socket.onReceive { socket, bytes, sender in
            // On the loop's thread, in the socket's modes: one whole datagram and who sent it.
            socket.send(bytes, to: sender)
        }
        socket.onError { _, error in
            // A datagram too long (EMSGSIZE), a refusal (ECONNREFUSED), a send that failed.
            print(error)
        }
        thread.loop.add(socket, forMode: .common)

        let client = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        thread.loop.add(client, forMode: .common)
        try await client.send(Array("ping".utf8), to: socket.localAddress)
        let (reply, from) = try await client.receive()
        // reply is "ping", from is socket.localAddress
        #expect(reply == Array("ping".utf8))
        #expect(from == socket.localAddress)
        #expect(printed.withLock { $0.isEmpty })
        client.invalidate()
        socket.invalidate()
        thread.stop()
    }

    /// A handler that runs its loop again (a nested run) gets the rest of its batch after it
    /// returns, in order: the nested run does not read over the batch being handed out.
    @Test func aNestedRunInAHandlerKeepsTheOrder() throws {
        let loop = Loop.current
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        let sender = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        let target = socket.localAddress
        var got: [UInt8] = []
        socket.onReceive(
            loop.isolated { _, bytes, _ in
                got.append(bytes[0])
                guard bytes[0] == 1 else { return }
                // More arrive while the nested run waits; the rest of the first batch comes first.
                sender.send(CollectionOfOne(4), to: target)
                sender.send(CollectionOfOne(5), to: target)
                loop.run(mode: .default, for: .milliseconds(50))
            })
        loop.add(socket, forMode: .default)
        for number in 1...3 { sender.send(CollectionOfOne(UInt8(number)), to: target) }
        loop.add(sender, forMode: .default)
        #expect(runLoop(loop, in: .default) { got.count == 5 })
        #expect(got == [1, 2, 3, 4, 5])
        socket.invalidate()
        sender.invalidate()
    }

    /// A socket added to a loop that has ended: its awaiting calls throw rather than wait forever.
    @Test func aLoopThatHasEndedRefuses() async throws {
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        endedLoop().add(socket, forMode: .default)
        #expect((await result { try await socket.receive() }).failure as? LoopError != nil)
        #expect((await result { try await socket.send([1], to: socket.localAddress) }).failure as? LoopError != nil)
        socket.invalidate()
    }

    /// Datagrams read in one batch for a single `receive()` wait for the next calls, or for a
    /// handler set later, which gets them before newer ones.
    @Test func aBatchReadForOneReceiveIsKeptInOrder() async throws {
        let thread = LoopThread(name: "datagram-held")
        defer { thread.stop() }
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        thread.loop.add(socket, forMode: .default)
        let sender = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        for number in 1...4 { sender.send(CollectionOfOne(UInt8(number)), to: socket.localAddress) }
        thread.loop.add(sender, forMode: .default)
        #expect(await eventually { sender.queuedDatagrams == 0 })
        #expect(try await socket.receive().bytes == [1])
        #expect(try await socket.receive().bytes == [2])
        let got = Locked<[UInt8]>([])
        socket.onReceive { _, bytes, _ in got.withLock { $0.append(bytes[0]) } }
        try await sender.send([5], to: socket.localAddress)
        #expect(await eventually { got.withLock { $0.count } == 3 })
        #expect(got.withLock { $0 } == [3, 4, 5])
        sender.invalidate()
        socket.invalidate()
    }

    /// Served in its modes only: a socket added to a custom mode receives nothing while the loop
    /// runs in another, and everything once that mode runs.
    @Test func servedInItsModesOnly() throws {
        let loop = Loop.current
        let mode = Loop.Mode("datagram-mode")
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        var got: [[UInt8]] = []
        socket.onReceive(loop.isolated { _, bytes, _ in got.append(bytes) })
        loop.add(socket, forMode: mode)
        let sender = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        loop.add(sender, forMode: mode)
        loop.add(sender, forMode: .default)
        sender.send([1], to: socket.localAddress)
        sender.send([2], to: socket.localAddress)
        for _ in 0..<5 { loop.run(mode: .default, for: .milliseconds(20)) }
        #expect(sender.queuedDatagrams == 0)
        #expect(got.isEmpty)
        #expect(runLoop(loop, in: mode) { got.count == 2 })
        #expect(got == [[1], [2]])
        socket.invalidate()
        sender.invalidate()
    }
}

/// Waits (polling) until `condition` holds or `limit` passes; returns whether it did.
private func waitUntil(within limit: Duration, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        usleep(1_000)
    }
    return true
}
