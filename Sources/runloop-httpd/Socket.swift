import Glibc

/// Thin wrappers over the socket calls the server makes.
enum Socket {
    struct Failure: Error, CustomStringConvertible {
        var call: String
        var code: Int32
        var description: String { "\(call): \(String(cString: strerror(code)))" }
    }

    /// A non-blocking IPv4 listening socket with SO_REUSEADDR and SO_REUSEPORT, bound and listening.
    static func listen(host: String, port: Int) throws(Failure) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(call: "socket", code: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            close(fd)
            throw Failure(call: "inet_pton(\(host))", code: EINVAL)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw Failure(call: "bind(\(host):\(port))", code: code)
        }
        guard Glibc.listen(fd, 4096) == 0 else {
            let code = errno
            close(fd)
            throw Failure(call: "listen", code: code)
        }
        return fd
    }

    /// The port a socket is bound to.
    static func localPort(_ fd: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Raises the soft limit on open descriptors to the hard limit, so `--max-connections` is not
    /// capped by the default of 1024.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// Nanoseconds of CLOCK_MONOTONIC_COARSE: a clock read with no system call, for idle bookkeeping.
    @inline(__always)
    static func coarseNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        return Int64(now.tv_sec) &* 1_000_000_000 &+ Int64(now.tv_nsec)
    }

    /// Seconds since 1970 (CLOCK_REALTIME_COARSE), for the Date header.
    @inline(__always)
    static func wallClockSeconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &now)
        return now.tv_sec
    }
}
