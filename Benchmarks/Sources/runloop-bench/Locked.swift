import Glibc

/// A value behind a pthread mutex, for the benchmark's own bookkeeping and for the posting idiom
/// of the C peers (a mutex around a queue). RunLoopKit's lock is internal to its package, and this
/// is another package. A pthread mutex rather than `Synchronization.Mutex` because ThreadSanitizer
/// understands it (it takes a `Mutex`'s bare futex for no lock at all).
///
/// Any thread. A copy shares the value and the lock.
struct Locked<Value>: @unchecked Sendable {
    private final class Box {
        /// Guarded by `mutex`: the runtime's exclusivity checks would only add to what is measured.
        @exclusivity(unchecked) var value: Value
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

        init(_ value: Value) {
            self.value = value
            mutex.initialize(to: pthread_mutex_t())
            let code = pthread_mutex_init(mutex, nil)
            precondition(code == 0, "runloop-bench: pthread_mutex_init failed (\(code))")
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }
    }

    private let box: Box

    /// A lock guarding `value`.
    init(_ value: Value) { box = Box(value) }

    /// Runs `body` with the value, holding the lock. `body` must not take this lock again.
    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(box.mutex)
        defer { pthread_mutex_unlock(box.mutex) }
        return try body(&box.value)
    }
}
