import Glibc

/// A runtime failure reported by RunLoopKit, with a message that names what failed.
///
/// A value; `Sendable`. Where a system call failed, `systemError` carries its `errno`, so callers
/// can tell, say, `ECONNREFUSED` from `ETIMEDOUT` without parsing the message.
public struct LoopError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed, in plain words (including the system call and errno where there is one).
    public let message: String

    /// The `errno` of the system call that failed, or nil when no system call failed.
    public let systemError: Int32?

    /// An error with the given message and, if a system call failed, its `errno`.
    public init(_ message: String, systemError: Int32? = nil) {
        self.message = message
        self.systemError = systemError
    }

    /// An error with the given message, where no system call failed (`systemError` is nil).
    public init(_ message: String) {
        self.init(message, systemError: nil)
    }

    /// The event backend (libevent or a kernel object it needs) could not be set up or used.
    static func backend(_ message: String, systemError: Int32? = nil) -> LoopError {
        LoopError("event backend: \(message)", systemError: systemError)
    }

    /// `call` (a system call, with what it was for) failed with `failure`: the one place a
    /// `LoopError` is made from an errno.
    static func systemCall(_ call: String, failedWith failure: Errno) -> LoopError {
        LoopError("\(call) failed: \(failure)", systemError: failure.code)
    }

    /// The loop has ended: its thread exited, or its `LoopThread` or `LoopGroup` was stopped.
    static let loopEnded = LoopError(
        "the loop has ended (its thread exited, or its LoopThread or LoopGroup was stopped); it runs no more work")

    /// Whether a system call failed because descriptors ran out: the process's limit (`EMFILE`,
    /// `ulimit -n`) or the system's (`ENFILE`).
    var isOutOfDescriptors: Bool { systemError == EMFILE || systemError == ENFILE }

    /// The message, led for running out of descriptors by what that means in plain words.
    var plainReason: String {
        guard isOutOfDescriptors else { return message }
        let limit = systemError == EMFILE ? "its limit, ulimit -n," : "the system's limit"
        return "the process has run out of file descriptors (\(limit) is reached: \(message))"
    }

    /// The message.
    public var description: String { message }
}
