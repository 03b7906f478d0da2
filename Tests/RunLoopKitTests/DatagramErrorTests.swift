import Foundation
import Glibc
import RunLoopKit
import Testing

/// The errors a datagram socket reports: the refusal a connected socket's datagram draws, and bad
/// addresses, each a clear `LoopError` with the system's errno.
@Suite struct DatagramErrorTests {
    /// A connected socket learns of the ICMP port unreachable its datagram drew: ECONNREFUSED.
    @Test func refusalOnAConnectedSocket() async throws { try await onOwnLoopThread(refusal) }

    private func refusal() async throws {
        let thread = LoopThread(name: "datagram-refusal")
        defer { thread.stop() }
        // A port Python bound and let go of: nothing listens there now.
        let closed = try runPython(
            """
            import socket
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            print(s.getsockname()[1])
            s.close()
            """
        ).output.trimmingCharacters(in: .whitespacesAndNewlines)
        let peer = try SocketAddress(ipv4: "127.0.0.1", port: try #require(Int(closed)))
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        try socket.connect(to: peer)
        #expect(socket.remoteAddress == peer)
        thread.loop.add(socket, forMode: .default)
        let watchdog = invalidate(socket, on: thread.loop)
        defer { watchdog.cancel() }
        try await socket.send([1, 2, 3], to: peer)
        let outcome = await result { try await socket.receive() }
        let error = try #require(outcome.failure as? LoopError)
        #expect(error.systemError == ECONNREFUSED)
        #expect(error.message.contains("\(peer)"))

        // Through the error handler, with `send(_:to:)`.
        let errors = Locked<[Int32?]>([])
        socket.onError { _, error in errors.withLock { $0.append(error.systemError) } }
        socket.onReceive { _, _, _ in }
        socket.send(CollectionOfOne(4), to: peer)
        #expect(await eventually { errors.withLock { $0 } == [ECONNREFUSED] })
        socket.invalidate()
    }

    /// Bad addresses give a clear `LoopError`.
    @Test func badAddresses() async throws {
        // Not an address of this machine.
        let foreign = #expect(throws: LoopError.self) {
            try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "192.0.2.1", port: 0))
        }
        #expect(foreign?.systemError == EADDRNOTAVAIL)
        #expect(foreign?.message.contains("192.0.2.1") == true)

        let thread = LoopThread(name: "datagram-bad")
        defer { thread.stop() }
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        // The port is taken.
        let taken = #expect(throws: LoopError.self) { try LoopDatagramSocket(bindingTo: socket.localAddress) }
        #expect(taken?.systemError == EADDRINUSE)
        // Not in a loop yet.
        #expect(await result { try await socket.receive() }.failure is LoopError)
        thread.loop.add(socket, forMode: .default)
        // Another family.
        let ipv6 = try SocketAddress(ipv6: "::1", port: 9)
        let family = await result { try await socket.send([1], to: ipv6) }
        #expect((family.failure as? LoopError)?.systemError == EAFNOSUPPORT)
        #expect((family.failure as? LoopError)?.message.contains("[::1]:9") == true)
        #expect(throws: LoopError.self) { try socket.connect(to: ipv6) }
        // Not a multicast group.
        let notGroup = #expect(throws: LoopError.self) {
            try socket.joinMulticastGroup(SocketAddress(ipv4: "10.1.2.3", port: 0))
        }
        #expect(notGroup?.message.contains("not a multicast group") == true)
        #expect(throws: LoopError.self) { try socket.setMulticastSending(timeToLive: 256) }
        // `send(_:to:)` reports to the error handler.
        let errors = Locked<[LoopError]>([])
        socket.onError { _, error in errors.withLock { $0.append(error) } }
        socket.send(CollectionOfOne(1), to: ipv6)
        #expect(await eventually { errors.withLock { $0.count } == 1 })
        #expect(errors.withLock { $0.first?.systemError } == EAFNOSUPPORT)
        socket.invalidate()
        // Invalidated: its descriptor is closed, so nothing more reaches it.
        let closed = #expect(throws: LoopError.self) { try socket.connect(to: socket.localAddress) }
        #expect(closed?.message.contains("invalidated") == true)

        // A Unix path with no socket.
        let unix = try LoopDatagramSocket(bindingTo: SocketAddress(unixPath: temporaryUnixPath("dgram-bad")))
        thread.loop.add(unix, forMode: .default)
        let missing = await result { try await unix.send([1], to: SocketAddress(unixPath: "/tmp/rlk-no-such-socket")) }
        #expect((missing.failure as? LoopError)?.systemError == ENOENT)
        #expect(throws: LoopError.self) { try unix.joinMulticastGroup(SocketAddress(ipv4: "239.1.1.1", port: 0)) }
        unix.invalidate()
    }
}
