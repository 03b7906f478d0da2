import Glibc

/// A value shared between threads, guarded by a pthread mutex: the lock the demo and the
/// benchmark use for their own bookkeeping.
///
/// Any thread. A pthread mutex rather than `Synchronization.Mutex`, whose futex lives in the runtime
/// library where ThreadSanitizer cannot see it (the sanitized runs would report every access it
/// guards as a race).
public final class Shared<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    /// A box holding `value`. Any thread.
    public init(_ value: Value) {
        self.value = value
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` on the value with the mutex held. Any thread; `body` must not take it again.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// A copy of the value, read under the mutex. Any thread.
    public var current: Value { withLock { $0 } }
}
