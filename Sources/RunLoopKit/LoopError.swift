/// A runtime failure reported by RunLoopKit, with a message that names what failed.
public struct LoopError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed, in plain words (including the system call and errno where there is one).
    public let message: String
    /// The `errno` of the system call that failed, when one did (e.g. `ENOENT` for a missing
    /// executable), so that callers can tell causes apart without parsing `message`.
    public let systemError: Int32?

    /// An error with the given message and, if a system call failed, its `errno`.
    public init(_ message: String, systemError: Int32? = nil) {
        self.message = message
        self.systemError = systemError
    }

    /// The event backend (libevent or a kernel object it needs) could not be set up or used.
    static func backend(_ message: String) -> LoopError { LoopError("event backend: \(message)") }

    public var description: String { message }
}
