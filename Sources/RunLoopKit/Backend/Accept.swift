internal import CLibevent
import Glibc

extension LibeventBackend {
    /// `accept4(SOCK_NONBLOCK | SOCK_CLOEXEC)`, which Swift's Glibc module does not declare: the
    /// new socket is non-blocking and not inherited by child processes, in one system call.
    /// Returns the descriptor, or -1 with `errno` set.
    static func accept(
        _ listener: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: UnsafeMutablePointer<socklen_t>
    ) -> Int32 {
        rlk_accept(listener, address, length)
    }
}
