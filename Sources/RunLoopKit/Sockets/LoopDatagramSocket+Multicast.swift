// Multicast on a datagram socket: joining and leaving groups, and how its multicast sends go out.

import Glibc

extension LoopDatagramSocket {
    /// Joins the multicast `group` (an IPv4 or IPv6 multicast address of the socket's family; its
    /// port is ignored) on the interface with address `interface` (nil: the kernel's choice). The
    /// socket then receives the group's datagrams sent to its port.
    ///
    /// Any thread. Throws a `LoopError` for an address that is not a multicast group, of another
    /// family, on a Unix socket, once the socket is invalidated, or with `systemError` set when
    /// the kernel refuses (`ENODEV`: no such interface).
    public func joinMulticastGroup(_ group: SocketAddress, onInterface interface: SocketAddress? = nil)
        throws(LoopError)
    {
        try setMembership(group, interface, join: true)
    }

    /// Leaves a multicast group joined with ``joinMulticastGroup(_:onInterface:)``.
    ///
    /// Any thread. Throws as `joinMulticastGroup` does (`EADDRNOTAVAIL`: not joined).
    public func leaveMulticastGroup(_ group: SocketAddress, onInterface interface: SocketAddress? = nil)
        throws(LoopError)
    {
        try setMembership(group, interface, join: false)
    }

    /// Sets how multicast datagrams this socket sends go out: from the interface with address
    /// `interface` (nil: the kernel's choice), with `timeToLive` hops (0: they do not leave this
    /// machine; 1, the kernel's default: the local network only), and whether they are looped
    /// back to this machine's members of the group.
    ///
    /// Any thread. Throws a `LoopError` for a Unix socket, once the socket is invalidated, for an
    /// interface of another family, a `timeToLive` outside 0...255, or with `systemError` set
    /// when the kernel refuses.
    public func setMulticastSending(
        interface: SocketAddress? = nil, timeToLive: Int = 1, loopback: Bool = true
    ) throws(LoopError) {
        try checkValid()
        guard family != AF_UNIX else { throw LoopError("a Unix datagram socket has no multicast") }
        guard (0...255).contains(timeToLive) else {
            throw LoopError("a multicast time to live must be in 0...255, not \(timeToLive)")
        }
        if let interface {
            try checkFamily(of: interface, for: "send multicast out of")
            try Platform.setMulticastInterface(fileDescriptor, interface).get(
                failing: "setsockopt(multicast interface \(interface))")
        }
        try Platform.setMulticastHops(fileDescriptor, family: family, timeToLive).get(
            failing: "setsockopt(multicast time to live)")
        try Platform.setMulticastLoop(fileDescriptor, family: family, loopback).get(
            failing: "setsockopt(multicast loopback)")
    }

    private func setMembership(_ group: SocketAddress, _ interface: SocketAddress?, join: Bool) throws(LoopError) {
        try checkValid()
        guard family != AF_UNIX else { throw LoopError("a Unix datagram socket cannot join a multicast group") }
        try checkFamily(of: group, for: join ? "join" : "leave")
        if let interface { try checkFamily(of: interface, for: "join a group on") }
        guard group.isMulticast else {
            let range = family == AF_INET ? "224.0.0.0/4" : "ff00::/8"
            throw LoopError("\(group.hostDescription) is not a multicast group address (\(range))")
        }
        let call = join ? "join" : "leave"
        try Platform.setMembership(fileDescriptor, group: group, interface: interface, join: join).get(
            failing:
                "\(call) multicast group \(group.hostDescription) on \(interface?.hostDescription ?? "any interface")")
    }
}
