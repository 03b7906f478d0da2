internal import CPlatform
import Glibc

// Datagram sockets: making and binding them, receiving and sending batches (recvmmsg, sendmmsg),
// connecting, and the multicast options. The EINTR rule: SystemCall.swift (connect of a datagram
// socket completes at once, so an interrupted one is made again like any other call).

extension Platform {
    /// The most datagrams one receive or send call moves.
    static var datagramBatchLimit: Int { Int(RLK_DATAGRAM_BATCH) }

    /// A non-blocking, close-on-exec datagram socket bound to `address` (`SO_REUSEADDR` and
    /// `SO_REUSEPORT` first with `reuseAddress`, for an IP address). Closed again if a step fails.
    static func datagramSocket(bindingTo address: SocketAddress, reuseAddress: Bool) throws(LoopError) -> Int32 {
        let descriptor = try retryingInterrupts { rlk_datagram_socket(address.family) }.get(failing: "socket")
        do throws(LoopError) {
            if reuseAddress && address.isInternet {
                setOption(descriptor, SOL_SOCKET, SO_REUSEADDR, 1)
                setOption(descriptor, SOL_SOCKET, SO_REUSEPORT, 1)
            }
            try retryingInterrupts { address.withSockaddr { bind(descriptor, $0, $1) } }.map { _ in }
                .get(failing: "bind(\(address))")
            return descriptor
        } catch {
            closeDescriptor(descriptor)
            throw error
        }
    }

    /// `connect` of a datagram socket: sends without an address go to `address`, only its
    /// datagrams are received, and an ICMP refusal from it fails a later call with ECONNREFUSED.
    static func connectDatagram(_ descriptor: Int32, to address: SocketAddress) -> Result<Void, Errno> {
        retryingInterrupts { address.withSockaddr { connect(descriptor, $0, $1) } }.map { _ in }
    }

    /// SO_RCVBUF or SO_SNDBUF.
    static func setBufferSize(_ descriptor: Int32, receive: Bool, _ bytes: Int) -> Result<Void, Errno> {
        setOption(descriptor, SOL_SOCKET, receive ? SO_RCVBUF : SO_SNDBUF, Int32(clamping: bytes))
    }

    /// `recvmmsg` of up to `count` datagrams into consecutive `size`-byte slots of `buffer`, with
    /// each one's sender and real length in `received`: how many arrived (0: none waited).
    @inline(__always)
    static func receiveDatagrams(
        _ descriptor: Int32, into buffer: UnsafeMutableRawPointer, slotSize size: Int,
        _ received: UnsafeMutablePointer<rlk_received>, count: Int
    ) -> Result<Int, Errno> {
        let got = retryingInterrupts {
            rlk_receive_datagrams(
                descriptor, buffer.assumingMemoryBound(to: UInt8.self), size, received, UInt32(count))
        }
        switch got {
        case .success(let count): return .success(Int(count))
        case .failure(let failure) where failure == .wouldBlock: return .success(0)
        case .failure(let failure): return .failure(failure)
        }
    }

    /// Sends the `count` datagrams at `outgoing` in order (`sendto` for one, `sendmmsg` for
    /// more): how many went; an `Errno` when the first one failed (`EAGAIN`: the socket's buffer
    /// is full).
    @inline(__always)
    static func sendDatagrams(
        _ descriptor: Int32, _ outgoing: UnsafePointer<rlk_outgoing>, count: Int
    ) -> Result<Int, Errno> {
        retryingInterrupts { rlk_send_datagrams(descriptor, outgoing, UInt32(count)) }.map { Int($0) }
    }

    /// `sendto` of `bytes` to `address` (nil: the connected peer), with MSG_DONTWAIT and
    /// MSG_NOSIGNAL.
    @inline(__always)
    static func sendDatagram(
        _ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, to address: SocketAddress?
    ) -> Result<Void, Errno> {
        let flags = Int32(MSG_DONTWAIT) | noSignal
        guard let address else {
            return retryingInterrupts { sendto(descriptor, bytes.baseAddress, bytes.count, flags, nil, 0) }.map { _ in }
        }
        return address.withSockaddr { name, length in
            retryingInterrupts { sendto(descriptor, bytes.baseAddress, bytes.count, flags, name, length) }.map { _ in }
        }
    }

    // MARK: Multicast

    /// Joins (or leaves) `group` on `interface` (nil: the kernel's choice). The caller has checked
    /// that both are of the socket's family.
    static func setMembership(
        _ descriptor: Int32, group: SocketAddress, interface: SocketAddress?, join: Bool
    ) -> Result<Void, Errno> {
        if group.family == AF_INET6 {
            let index: Int32
            switch interfaceIndex(interface) {
            case .success(let found): index = found
            case .failure(let failure): return .failure(failure)
            }
            return group.withSockaddr { name, _ in
                name.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { group in
                    retryingInterrupts { rlk_join_ipv6_group(descriptor, group, UInt32(index), join ? 1 : 0) }
                }
            }.map { _ in }
        }
        return group.withSockaddr { name, _ in
            name.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { group in
                guard let interface else {
                    return retryingInterrupts { rlk_join_ipv4_group(descriptor, group, nil, join ? 1 : 0) }
                }
                return interface.withSockaddr { local, _ in
                    local.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { local in
                        retryingInterrupts { rlk_join_ipv4_group(descriptor, group, local, join ? 1 : 0) }
                    }
                }
            }
        }.map { _ in }
    }

    /// IP_MULTICAST_IF or IPV6_MULTICAST_IF: multicast goes out of the interface with address
    /// `interface`.
    static func setMulticastInterface(_ descriptor: Int32, _ interface: SocketAddress) -> Result<Void, Errno> {
        if interface.family == AF_INET6 {
            return interfaceIndex(interface).flatMap { index in
                retryingInterrupts { rlk_set_ipv6_multicast_interface(descriptor, UInt32(index)) }.map { _ in }
            }
        }
        return interface.withSockaddr { name, _ in
            name.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { local in
                retryingInterrupts { rlk_set_ipv4_multicast_interface(descriptor, local) }
            }
        }.map { _ in }
    }

    /// IP_MULTICAST_TTL or IPV6_MULTICAST_HOPS.
    static func setMulticastHops(_ descriptor: Int32, family: Int32, _ hops: Int) -> Result<Void, Errno> {
        retryingInterrupts { rlk_set_multicast_hops(descriptor, family, Int32(hops)) }.map { _ in }
    }

    /// IP_MULTICAST_LOOP or IPV6_MULTICAST_LOOP.
    static func setMulticastLoop(_ descriptor: Int32, family: Int32, _ enabled: Bool) -> Result<Void, Errno> {
        retryingInterrupts { rlk_set_multicast_loop(descriptor, family, enabled ? 1 : 0) }.map { _ in }
    }

    /// The index of the interface with IPv6 address `address` (`getifaddrs`); 0 for nil.
    private static func interfaceIndex(_ address: SocketAddress?) -> Result<Int32, Errno> {
        guard let address else { return .success(0) }
        return address.withSockaddr { name, _ in
            name.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { local in
                retryingInterrupts { rlk_interface_index(local) }
            }
        }
    }
}
