internal import CPlatform
import Glibc

// Sockets: making, binding, connecting and accepting them; the reads and sends of connections
// (hot: inlined, nothing allocated); options, addresses, socket pairs and name look-ups. The EINTR
// rule: SystemCall.swift.

extension Platform {
    // MARK: Constants

    /// `MSG_NOSIGNAL`: what every send passes, so that a peer that has gone raises no SIGPIPE.
    static var noSignal: Int32 { rlk_msg_nosignal() }

    /// `SOCK_STREAM`, for `getaddrinfo` hints.
    static var streamKind: Int32 { rlk_sock_stream() }

    /// `SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC`: the sockets listeners and connections make.
    static var streamSocketType: Int32 { rlk_stream_socket_type() }

    // MARK: Making, listening, connecting, accepting

    /// A non-blocking, close-on-exec stream socket for `address`'s family.
    static func streamSocket(for address: SocketAddress) -> Result<Int32, Errno> {
        retryingInterrupts { socket(address.family, streamSocketType, 0) }
    }

    /// A listening socket bound to `address`. Closed again if any step fails.
    static func listeningSocket(on address: SocketAddress, backlog: Int, reusePort: Bool) throws(LoopError) -> Int32 {
        let descriptor = try streamSocket(for: address).get(failing: "socket")
        do throws(LoopError) {
            if address.isInternet {
                setOption(descriptor, SOL_SOCKET, SO_REUSEADDR, 1)
                if reusePort { setOption(descriptor, SOL_SOCKET, SO_REUSEPORT, 1) }
            }
            try retryingInterrupts { address.withSockaddr { bind(descriptor, $0, $1) } }.map { _ in }
                .get(failing: "bind(\(address))")
            try retryingInterrupts { listen(descriptor, Int32(clamping: backlog)) }.map { _ in }
                .get(failing: "listen(\(address))")
            return descriptor
        } catch {
            closeDescriptor(descriptor)
            throw error
        }
    }

    /// Readies a listening stream socket the process inherited (systemd, a supervisor) for a
    /// listener: throws unless it is open (`EBADF`), a socket (`ENOTSOCK`), a stream socket and
    /// listening (`EINVAL`); then makes it non-blocking and close-on-exec.
    static func adoptListeningSocket(_ descriptor: Int32) throws(LoopError) {
        func option(_ name: Int32) throws(LoopError) -> Int32 {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return try retryingInterrupts { getsockopt(descriptor, SOL_SOCKET, name, &value, &length) }
                .map { _ in value }.get(failing: "getsockopt(descriptor \(descriptor))")
        }
        let type = try option(SO_TYPE)
        guard type == streamKind else {
            throw LoopError("descriptor \(descriptor) is not a stream socket (type \(type))", systemError: EINVAL)
        }
        guard try option(SO_ACCEPTCONN) != 0 else {
            throw LoopError("descriptor \(descriptor) is a stream socket that is not listening", systemError: EINVAL)
        }
        try setNonBlocking(descriptor).get(failing: "fcntl(descriptor \(descriptor), O_NONBLOCK)")
        try retryingInterrupts { fcntl(descriptor, F_SETFD, FD_CLOEXEC) }.map { _ in }
            .get(failing: "fcntl(descriptor \(descriptor), FD_CLOEXEC)")
    }

    /// `connect` on a non-blocking socket: success once the attempt has started (or already
    /// connected), its outcome to be read with `pendingError` when the socket turns writable. An
    /// interrupted connect has started too (the EINTR rule). A Unix socket whose listener's backlog
    /// is full fails with EAGAIN instead of waiting.
    static func startConnecting(_ descriptor: Int32, to address: SocketAddress) -> Result<Void, Errno> {
        guard address.withSockaddr({ connect(descriptor, $0, $1) }) != 0 else { return .success(()) }
        let failure = Errno.current
        return failure == .inProgress || failure == .interrupted ? .success(()) : .failure(failure)
    }

    /// `accept4(SOCK_NONBLOCK | SOCK_CLOEXEC)`, which Swift's Glibc module does not declare: the
    /// new socket, non-blocking and not inherited by child processes (in one system call), and the
    /// peer's address.
    static func accept(_ listener: Int32) -> Result<(descriptor: Int32, peer: SocketAddress), Errno> {
        var storage = sockaddr_storage()
        var length = socklen_t(0)
        let accepted = withUnsafeMutablePointer(to: &storage) { storagePointer in
            storagePointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                retryingInterrupts {
                    length = socklen_t(MemoryLayout<sockaddr_storage>.size)
                    return rlk_accept(listener, address, &length)
                }
            }
        }
        return accepted.map { ($0, SocketAddress(storage: storage, length: length)) }
    }

    /// The address the socket is bound to (`getsockname`), or the peer's (`getpeername`).
    static func address(of descriptor: Int32, peer: Bool = false) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) { storagePointer in
            storagePointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                retryingInterrupts {
                    peer ? getpeername(descriptor, address, &length) : getsockname(descriptor, address, &length)
                }.map { _ in }
            }
        }
        guard case .success = named else { return nil }
        return SocketAddress(storage: storage, length: length)
    }

    // MARK: Options and state

    /// `setsockopt` of an `Int32` option.
    @discardableResult
    static func setOption(_ descriptor: Int32, _ level: Int32, _ name: Int32, _ value: Int32) -> Result<Void, Errno> {
        var value = value
        return retryingInterrupts {
            setsockopt(descriptor, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
        }.map { _ in }
    }

    /// TCP_NODELAY on TCP sockets: a server's replies and a client's requests go out at once.
    static func disableNagle(_ descriptor: Int32, for address: SocketAddress) {
        if address.isInternet { setOption(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, 1) }
    }

    /// SO_LINGER with a zero timeout: closing the socket then sends a reset (RST) at once.
    static func resetOnClose(_ descriptor: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = retryingInterrupts {
            setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
    }

    /// `shutdown(SHUT_WR)`: the peer reads the end of stream after the bytes already sent.
    static func shutdownOutput(_ descriptor: Int32) {
        _ = retryingInterrupts { shutdown(descriptor, Int32(SHUT_WR)) }
    }

    /// The pending error of a socket (`SO_ERROR`), nil if there is none: a non-blocking connect's
    /// outcome, or a reset.
    static func pendingError(_ descriptor: Int32) -> Errno? {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        let read = retryingInterrupts { getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &code, &length) }
        if case .failure(let failure) = read { return failure }
        return code == 0 ? nil : Errno(code)
    }

    /// Whether the peer has ended its stream (`POLLRDHUP`), whatever input still waits unread.
    static func peerHasEnded(_ descriptor: Int32) -> Bool {
        // POLLRDHUP (Linux's <poll.h> defines it under _GNU_SOURCE only, which Glibc's import lacks).
        let readHangUp: Int16 = 0x2000
        var entry = pollfd(fd: descriptor, events: readHangUp, revents: 0)
        let ready = retryingInterrupts { poll(&entry, 1, 0) }
        return (try? ready.get()) == 1 && entry.revents & (readHangUp | Int16(POLLHUP)) != 0
    }

    // MARK: Reading and sending

    /// `recv` into `buffer`: the count read, 0 at end of stream.
    @inline(__always)
    static func receive(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
        retryingInterrupts { recv(descriptor, buffer.baseAddress, buffer.count, 0) }
    }

    /// `readv` into the `count` extents at `vectors`: the count read, 0 at end of stream.
    @inline(__always)
    static func receive(
        _ descriptor: Int32, into vectors: UnsafeMutablePointer<iovec>, count: Int
    ) -> Result<Int, Errno> {
        retryingInterrupts { readv(descriptor, vectors, Int32(count)) }
    }

    /// `send` with MSG_NOSIGNAL (never SIGPIPE): the count sent.
    @inline(__always)
    static func send(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Int, Errno> {
        retryingInterrupts { Glibc.send(descriptor, bytes.baseAddress, bytes.count, noSignal) }
    }

    /// Sends the `count` blocks at `vectors` in order, with MSG_NOSIGNAL: the count sent. One
    /// block (a response, a message) goes with plain `send`, which spares the kernel the copy and
    /// checks of a message header and an iovec array; more with one `sendmsg`, a writev.
    @inline(__always)
    static func send(_ descriptor: Int32, vectors: UnsafeMutablePointer<iovec>, count: Int) -> Result<Int, Errno> {
        if count == 1 {
            return retryingInterrupts { Glibc.send(descriptor, vectors[0].iov_base, vectors[0].iov_len, noSignal) }
        }
        var message = msghdr()
        message.msg_iov = vectors
        message.msg_iovlen = count
        return retryingInterrupts { sendmsg(descriptor, &message, noSignal) }
    }

    // MARK: Socket pairs and names

    /// `socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)`: the two connected ends, both blocking.
    static func streamSocketPair() -> Result<(Int32, Int32), Errno> {
        var ends: (Int32, Int32) = (-1, -1)
        let made = withUnsafeMutableBytes(of: &ends) { raw in
            retryingInterrupts { rlk_stream_socket_pair(raw.baseAddress!.assumingMemoryBound(to: Int32.self)) }
        }
        return made.map { _ in ends }
    }

    /// Parses `host`, an IPv4 (`family` `AF_INET`) or IPv6 (`AF_INET6`) address in text, into
    /// the `in_addr` or `in6_addr` at `address` (`inet_pton`): whether it was one.
    static func parseInternetAddress(_ host: String, family: Int32, into address: UnsafeMutableRawPointer) -> Bool {
        inet_pton(family, host, address) == 1
    }

    /// The text of the `in_addr` or `in6_addr` at `address` (`inet_ntop`): `127.0.0.1`, `::1`.
    static func internetAddressText(family: Int32, _ address: UnsafeRawPointer) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        // Fails only for an unknown family or too short a buffer: neither here.
        _ = inet_ntop(family, address, &text, socklen_t(text.count))
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The IPv4 and IPv6 addresses `host` names, for TCP to `port`, in the order `getaddrinfo`
    /// gives them, each once. Blocks: never on a loop's thread.
    static func resolve(host: String, port: Int) throws(LoopError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_socktype = streamKind
        var list: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, String(port), &hints, &list)
        guard code == 0 else {
            if code == EAI_SYSTEM {
                throw LoopError.systemCall("cannot resolve \"\(host)\": getaddrinfo", failedWith: .current)
            }
            throw LoopError("cannot resolve \"\(host)\": \(String(cString: gai_strerror(code)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry = list
        while let info = entry?.pointee {
            if let address = info.ai_addr, info.ai_family == AF_INET || info.ai_family == AF_INET6 {
                let found = SocketAddress(raw: UnsafeRawBufferPointer(start: address, count: Int(info.ai_addrlen)))
                if !addresses.contains(found) { addresses.append(found) }
            }
            entry = info.ai_next
        }
        return addresses
    }
}
