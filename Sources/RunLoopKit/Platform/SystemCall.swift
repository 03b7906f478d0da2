import Glibc

// Every system call RunLoopKit makes beyond libevent goes through `Platform`, the one layer:
// descriptors and files in Platform+Descriptors.swift, sockets in Platform+Sockets.swift and
// Platform+Datagrams.swift, child processes in Platform+Processes.swift, inotify in
// Platform+Inotify.swift, threads, thread-specific
// slots, mutexes and yielding in Platform+Threads.swift, mapped memory in Platform+Memory.swift,
// thread names, the process id, clocks and signals in Platform.swift; the failures of libevent's
// calls (which make system calls of their own) at the end of this file. No other file calls one. A wrapper returns what the call gave, or the `Errno` it
// failed with (`Result<_, Errno>`), read at once: no caller reads `errno`, and none sees a
// negative count. A `LoopError` is made from an `Errno` in one place,
// `LoopError.systemCall(_:failedWith:)`.
//
// EINTR (a signal whose handler was installed without SA_RESTART arrived while the call waited),
// by one rule, applied here and nowhere else:
//
// - A call that did nothing when it was interrupted is made again, inside its wrapper: recv, readv,
//   send, sendmsg, accept4, open, read, readlink, write of an eventfd, fcntl, poll, waitid,
//   waitpid and the rest. No caller ever sees EINTR, so none can mistake it for a failure (and close a
//   connection over it) or for "no more now" (and leave bytes unread).
// - close is never made again: Linux has let go of the descriptor even when close reports EINTR,
//   and a second close could close a descriptor another thread has just been given. Its result is
//   not reported.
// - connect is not made again either: an interrupted connect goes on in the kernel (a second call
//   says EALREADY), so its wrapper reports EINTR as it does EINPROGRESS, as started; the outcome is
//   read from SO_ERROR once the socket turns writable, as for any non-blocking connect.
// - Calls that return an error number instead of setting errno (posix_spawn and its file actions)
//   do not fail with EINTR; their number is returned as an `Errno` all the same.

/// The error number a system call failed with.
struct Errno: Error, Equatable, CustomStringConvertible {
    /// The C value (`EAGAIN`, `ECONNRESET`, ...).
    let code: Int32

    @inline(__always)
    init(_ code: Int32) { self.code = code }

    /// The calling thread's `errno`, for a wrapper to read right after its call failed.
    @inline(__always)
    static var current: Errno { Errno(errno) }

    /// `EAGAIN` (`EWOULDBLOCK` on Linux): a non-blocking call had nothing to do now.
    static var wouldBlock: Errno { Errno(EAGAIN) }

    /// `EINTR`: a signal handler ran while the call waited.
    static var interrupted: Errno { Errno(EINTR) }

    /// `EINPROGRESS`: a non-blocking connect has started.
    static var inProgress: Errno { Errno(EINPROGRESS) }

    /// The system's words for it and its number: "Connection refused (errno 111)".
    var description: String { "\(String(cString: strerror(code))) (errno \(code))" }
}

extension Result where Failure == Errno {
    /// The value, or a `LoopError` for `call` (named only on failure) failing with the errno.
    @inline(__always)
    func get(failing call: @autoclosure () -> String) throws(LoopError) -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let failure): throw LoopError.systemCall(call(), failedWith: failure)
        }
    }
}

extension Platform {
    /// Makes `call` (a system call that returns -1 and sets `errno` on failure) until it is not
    /// interrupted: its value, or the errno it failed with.
    @inline(__always)
    static func retryingInterrupts<Value: FixedWidthInteger>(_ call: () -> Value) -> Result<Value, Errno> {
        while true {
            let value = call()
            if value != -1 { return .success(value) }
            let failure = Errno.current
            if failure != .interrupted { return .failure(failure) }
        }
    }

    /// The outcome of a call that returns 0 or an error number (posix_spawn and its file actions).
    @inline(__always)
    static func errorNumber(_ code: Int32) -> Result<Void, Errno> {
        code == 0 ? .success(()) : .failure(Errno(code))
    }
}

// libevent makes system calls of its own (epoll_create1, epoll_ctl, epoll_wait, its signal pipe)
// and reports their failure as -1 or NULL, with `errno` left as the failing call (or `malloc`) set
// it. Its epoll_wait retries EINTR itself, and epoll_ctl is never interrupted, so no EINTR reaches
// RunLoopKit through it. A failure of libevent's own (an argument it refuses) sets no errno; the
// wrappers below clear `errno` before the call so that such a failure reports none instead of an
// older one.

/// How a libevent call failed.
struct LibeventFailure: Error, Equatable, CustomStringConvertible {
    /// The errno the system call (or allocation) that failed inside libevent left; nil for a
    /// failure of libevent's own.
    let systemError: Errno?

    var description: String { systemError.map { "\($0)" } ?? "inside libevent, no errno" }
}

extension Platform {
    /// Makes `call` (a libevent call that returns -1 on failure, else 0 or more): what it
    /// returned, or how it failed, read at once.
    @inline(__always)
    static func libevent(_ call: () -> Int32) -> Result<Int32, LibeventFailure> {
        errno = 0
        let code = call()
        guard code == -1 else { return .success(code) }
        let failure = errno
        return .failure(LibeventFailure(systemError: failure == 0 ? nil : Errno(failure)))
    }

    /// Makes `call` (a libevent call that returns NULL on failure): the object it made, or how it
    /// failed, read at once.
    @inline(__always)
    static func libevent(_ call: () -> OpaquePointer?) -> Result<OpaquePointer, LibeventFailure> {
        errno = 0
        if let made = call() { return .success(made) }
        let failure = errno
        return .failure(LibeventFailure(systemError: failure == 0 ? nil : Errno(failure)))
    }
}
