import Glibc

/// A value behind a `pthread_mutex_t`, in one allocation.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes:
/// with `Mutex` (a bare futex on Linux) every access it protects is reported as a race, and the
/// sanitizer runs would be noise.
struct Locked<Value>: @unchecked Sendable {
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit {
            // ManagedBuffer destroys the header (the value) itself; the mutex is ours.
            _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
        }
    }

    private let storage: Storage

    init(_ value: Value) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in value }
        buffer.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            let code = pthread_mutex_init(mutex, nil)
            precondition(code == 0, "RunLoopKit: pthread_mutex_init failed (\(code))")
        }
        // ManagedBuffer.create returns the dynamic subclass instance.
        storage = unsafeDowncast(buffer, to: Storage.self)
    }

    /// Runs `body` with the value, holding the lock. `body` must not take this lock again.
    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { value, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }
}
