/// Runs blocking system calls (`getaddrinfo`) away from every loop thread, on the library's
/// shared work pool (`LoopWorkPool.shared`): the one place that decides where they run.
enum BlockingWork {
    /// Runs `work` on a thread of the shared pool and returns its result.
    ///
    /// Any thread or task. Throws what `work` throws, `CancellationError` if the calling task is
    /// cancelled before the work starts, or a `LoopError` if the shared pool was shut down.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws(LoopError) -> T) async throws -> T {
        try await LoopWorkPool.shared.run { try work() }
    }
}
