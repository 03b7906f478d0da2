/// A runtime failure reported by RunLoopKit, with a message that names what failed.
public struct LoopError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed, in plain words (including the system call and errno where there is one).
    public let message: String

    /// The `errno` of the system call that failed, when there was one: callers can tell
    /// `ECONNREFUSED` from `ETIMEDOUT` without parsing `message`.
    public let systemError: Int32?

    /// An error with the given message and, when a system call failed, its `errno`.
    public init(_ message: String, systemError: Int32? = nil) {
        self.message = message
        self.systemError = systemError
    }

    /// The event backend (libevent or a kernel object it needs) could not be set up or used.
    static func backend(_ message: String) -> LoopError { LoopError("event backend: \(message)") }

    public var description: String { message }
}
