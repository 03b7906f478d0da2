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

    /// `SOCK_STREAM`, `SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC` for `socket`, and `MSG_NOSIGNAL`
    /// for `send`: in an optimized (whole-module) build these come from the system headers this
    /// file's module imports, not from Swift's Glibc module, so the socket code outside the
    /// backend takes them from here.
    static let streamSocketType = Int32(SOCK_STREAM.rawValue)
    static let nonBlockingStreamSocketType = Int32(
        SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
    static let sendNoSignal = Int32(MSG_NOSIGNAL)
}
