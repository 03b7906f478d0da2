import Glibc

/// The socket system calls the listeners and connections make, failing with a `LoopError` that
/// names the call and carries its `errno`.
enum SocketCall {
    /// A `LoopError` for `call` failing with `code`.
    static func failure(_ call: String, _ code: Int32) -> LoopError {
        LoopError.systemCall(call, failedWith: code)
    }

    /// A non-blocking, close-on-exec stream socket for `address`'s family.
    static func makeSocket(for address: SocketAddress) throws(LoopError) -> Int32 {
        let descriptor = socket(address.family, Platform.streamSocketType, 0)
        guard descriptor >= 0 else { throw failure("socket", errno) }
        return descriptor
    }

    static func setOption(_ descriptor: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        _ = setsockopt(descriptor, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// TCP_NODELAY on TCP sockets: a server's replies and a client's requests go out at once.
    static func disableNagle(_ descriptor: Int32, _ address: SocketAddress) {
        if address.isInternet { setOption(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, 1) }
    }

    /// A listening socket bound to `address`. Closed again if any step fails.
    static func listen(on address: SocketAddress, backlog: Int, reusePort: Bool) throws(LoopError) -> Int32 {
        let descriptor = try makeSocket(for: address)
        do throws(LoopError) {
            if address.isInternet {
                setOption(descriptor, SOL_SOCKET, SO_REUSEADDR, 1)
                if reusePort { setOption(descriptor, SOL_SOCKET, SO_REUSEPORT, 1) }
            }
            let bound = address.withSockaddr { bind(descriptor, $0, $1) }
            guard bound == 0 else { throw failure("bind(\(address))", errno) }
            guard Glibc.listen(descriptor, Int32(clamping: backlog)) == 0 else {
                throw failure("listen(\(address))", errno)
            }
            return descriptor
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// The address the socket is bound to (`getsockname`), or the peer's (`getpeername`).
    static func address(of descriptor: Int32, peer: Bool = false) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let code = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                peer ? getpeername(descriptor, $0, &length) : getsockname(descriptor, $0, &length)
            }
        }
        return code == 0 ? SocketAddress(storage: storage, length: length) : nil
    }

    /// Accepts one connection: its descriptor and the peer's address, or -1 with `errno`.
    static func accept(_ listener: Int32) -> (Int32, SocketAddress?) {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let descriptor = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Platform.accept(listener, $0, &length) }
        }
        return (descriptor, descriptor >= 0 ? SocketAddress(storage: storage, length: length) : nil)
    }

    /// The pending error of a socket (`SO_ERROR`): a non-blocking connect's outcome.
    static func pendingError(_ descriptor: Int32) -> Int32 {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &code, &length) != 0 { return errno }
        return code
    }

    /// Whether the peer has ended its stream (`POLLRDHUP`), whatever input still waits unread.
    static func peerHasEnded(_ descriptor: Int32) -> Bool {
        // POLLRDHUP (Linux's <poll.h> defines it under _GNU_SOURCE only, which Glibc's import lacks).
        let readHangUp: Int16 = 0x2000
        var entry = pollfd(fd: descriptor, events: readHangUp, revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & (readHangUp | Int16(POLLHUP)) != 0
    }

    /// SO_LINGER with a zero timeout: closing the socket then sends a reset (RST) at once.
    static func resetOnClose(_ descriptor: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    /// `recv` into `buffer`: the count read, 0 at end of stream, or -errno.
    static func receive(_ descriptor: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = recv(descriptor, buffer.baseAddress, buffer.count, 0)
        return count < 0 ? -Int(errno) : count
    }

    /// `send` with MSG_NOSIGNAL (never SIGPIPE): the count sent, or -errno.
    static func send(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        let sent = Glibc.send(descriptor, bytes.baseAddress, bytes.count, Platform.noSignal)
        return sent < 0 ? -Int(errno) : sent
    }
}
