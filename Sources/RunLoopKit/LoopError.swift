/// A runtime failure reported by RunLoopKit, with a message that names what failed.
public struct LoopError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed, in plain words (including the system call and errno where there is one).
    public let message: String

    /// An error with the given message.
    public init(_ message: String) { self.message = message }

    /// The event backend (libevent or a kernel object it needs) could not be set up or used.
    static func backend(_ message: String) -> LoopError { LoopError("event backend: \(message)") }

    public var description: String { message }
}
