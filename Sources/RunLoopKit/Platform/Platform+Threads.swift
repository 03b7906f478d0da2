import Glibc

// Threads: creating, joining and telling them apart (pthread), each call wrapped once. pthread
// calls return their error number instead of setting errno, and none fails with EINTR (POSIX
// forbids it), so nothing here is made again.

extension Platform {
    /// A thread, as `startThread(_:)` and `currentThread` give it.
    typealias Thread = pthread_t

    /// Starts a thread that runs `body`, then exits: `pthread_create` with default attributes.
    /// Fails with its error number (`EAGAIN`: the system's or the user's thread limit); `body` is
    /// let go unrun then.
    static func startThread(_ body: @escaping @Sendable () -> Void) -> Result<Thread, Errno> {
        final class Body {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        let code = pthread_create(
            &thread, nil,
            { context in
                Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
        guard code == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            return .failure(Errno(code))
        }
        return .success(thread)
    }

    /// Waits for `thread` to exit (`pthread_join`). Not the calling thread itself, and not a
    /// thread joined or detached before: programmer errors, which `pthread_join` may not report.
    static func joinThread(_ thread: Thread) {
        _ = pthread_join(thread, nil)
    }

    /// Lets `thread`'s resources go when it exits, without waiting for it (`pthread_detach`).
    static func detachThread(_ thread: Thread) {
        _ = pthread_detach(thread)
    }

    /// The calling thread (`pthread_self`).
    @inline(__always)
    static var currentThread: Thread { pthread_self() }

    /// Whether `thread` is the calling thread (`pthread_equal` with `pthread_self`).
    @inline(__always)
    static func isCurrentThread(_ thread: Thread) -> Bool {
        pthread_equal(thread, pthread_self()) != 0
    }
}
