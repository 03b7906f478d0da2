import Glibc

/// Runs blocking system calls (`getaddrinfo`) away from every loop thread.
///
/// Each call gets a detached thread of its own. This is the one place to change to hand the work
/// to a shared pool of threads instead.
enum BlockingWork {
    /// Runs `work` on another thread and returns its result.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws(LoopError) -> T) async throws(LoopError) -> T {
        let result: Result<T, LoopError> = await withCheckedContinuation { continuation in
            startThread {
                do throws(LoopError) {
                    continuation.resume(returning: .success(try work()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    private final class Job: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    private static func startThread(_ body: @escaping @Sendable () -> Void) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let job = Unmanaged.passRetained(Job(body)).toOpaque()
        let code = pthread_create(
            &thread, &attributes,
            { raw in
                Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().body()
                return nil
            }, job)
        precondition(code == 0, "RunLoopKit: pthread_create failed (\(code)); cannot resolve a name")
    }
}
