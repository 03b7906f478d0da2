import Foundation
import Glibc
import RunLoopKit
import Testing

/// Multicast on the loopback interface, IPv4 and IPv6, with Python's `socket` module on the other
/// side: nothing leaves the machine.
@Suite struct DatagramMulticastTests {
    /// Multicast on loopback only: joined on 127.0.0.1, sent out of 127.0.0.1 with a time to live
    /// of 0, so that nothing leaves the machine.
    @Test func multicastOnLoopback() async throws { try await onOwnLoopThread(multicast) }

    private func multicast() async throws {
        let thread = LoopThread(name: "datagram-multicast")
        defer { thread.stop() }
        let group = try SocketAddress(ipv4: "239.255.71.29", port: 0)
        let loopback = try SocketAddress(ipv4: "127.0.0.1", port: 0)
        let receiver = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "0.0.0.0", port: 0), reuseAddress: true)
        do {
            try receiver.joinMulticastGroup(group, onInterface: loopback)
        } catch {
            try Test.cancel("the kernel refuses to join a multicast group on the loopback interface: \(error)")
        }
        thread.loop.add(receiver, forMode: .default)
        let port = try #require(receiver.localAddress.port)
        try runPython(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            s.sendto(b"to the group", ("239.255.71.29", int(sys.argv[1])))
            """, ["\(port)"])
        // Started once the sender has run: an interpreter takes seconds to start on a loaded machine.
        let watchdog = invalidate(receiver, on: thread.loop)
        defer { watchdog.cancel() }
        let (bytes, _) = try await receiver.receive()
        #expect(bytes == Array("to the group".utf8))

        // Sent by a LoopDatagramSocket, out of 127.0.0.1 with a time to live of 0.
        let sender = try LoopDatagramSocket(bindingTo: loopback)
        try sender.setMulticastSending(interface: loopback, timeToLive: 0, loopback: true)
        thread.loop.add(sender, forMode: .default)
        try await sender.send(Array("from the loop".utf8), to: SocketAddress(ipv4: "239.255.71.29", port: port))
        let (again, from) = try await receiver.receive()
        #expect(again == Array("from the loop".utf8))
        #expect(from == sender.localAddress)
        try receiver.leaveMulticastGroup(group, onInterface: loopback)
        sender.invalidate()
        receiver.invalidate()
    }

    /// IPv6 multicast on loopback: joined on ::1 (the interface found by its address), sent out of
    /// it with no hop allowed. Linux's loopback interface has no IPv6 multicast route, so there
    /// the sending half is skipped with the kernel's answer; joining and leaving are checked.
    @Test func ipv6MulticastOnLoopback() async throws { try await onOwnLoopThread(ipv6Multicast) }

    private func ipv6Multicast() async throws {
        let thread = LoopThread(name: "datagram-multicast6")
        defer { thread.stop() }
        let group = try SocketAddress(ipv6: "ff12::7129", port: 0)
        let loopback = try SocketAddress(ipv6: "::1", port: 0)
        let receiver = try LoopDatagramSocket(bindingTo: SocketAddress(ipv6: "::", port: 0), reuseAddress: true)
        defer { receiver.invalidate() }
        try receiver.joinMulticastGroup(group, onInterface: loopback)
        // An interface is named by an address it has: one no interface has is a clear error.
        let unknown = try SocketAddress(ipv6: "2001:db8::7129", port: 0)
        let error = #expect(throws: LoopError.self) { try receiver.joinMulticastGroup(group, onInterface: unknown) }
        #expect(error?.systemError == EADDRNOTAVAIL)
        // The sender's side takes the same interface.
        let sender = try LoopDatagramSocket(bindingTo: SocketAddress(ipv6: "::1", port: 0))
        defer { sender.invalidate() }
        try sender.setMulticastSending(interface: loopback, timeToLive: 0, loopback: true)

        thread.loop.add(receiver, forMode: .default)
        let port = try #require(receiver.localAddress.port)
        let sent = try runPython(
            """
            import errno, socket, sys
            lo = socket.if_nametoindex("lo")
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, lo)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 0)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 1)
            try:
                s.sendto(b"to the group", ("ff12::7129", int(sys.argv[1]), 0, lo))
                print("sent")
            except OSError as e:
                print(errno.errorcode.get(e.errno, e.errno))
            """, ["\(port)"]
        ).output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard sent == "sent" else {
            try receiver.leaveMulticastGroup(group, onInterface: loopback)
            try Test.cancel(
                "the kernel cannot send IPv6 multicast on the loopback interface (\(sent)); joined and left")
        }
        // Started once the sender has run: an interpreter takes seconds to start on a loaded machine.
        let watchdog = invalidate(receiver, on: thread.loop)
        defer { watchdog.cancel() }
        let (bytes, _) = try await receiver.receive()
        #expect(bytes == Array("to the group".utf8))
        thread.loop.add(sender, forMode: .default)
        try await sender.send(Array("from the loop".utf8), to: SocketAddress(ipv6: "ff12::7129", port: port))
        let (again, from) = try await receiver.receive()
        #expect(again == Array("from the loop".utf8))
        #expect(from == sender.localAddress)
        try receiver.leaveMulticastGroup(group, onInterface: loopback)
    }
}
