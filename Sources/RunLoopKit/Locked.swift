import Glibc
import Synchronization

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

    /// `adaptive`: a `PTHREAD_MUTEX_ADAPTIVE_NP` mutex, which spins briefly before sleeping in the
    /// kernel; for a lock held for a few instructions by many threads, where a contended thread
    /// would otherwise pay a futex sleep and wake-up for a lock freed nanoseconds later.
    init(_ value: Value, adaptive: Bool = false) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in value }
        buffer.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            if adaptive { pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP)) }
            let code = pthread_mutex_init(mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
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

extension Atomic where Value == Bool {
    /// Takes a lock word: spins briefly, then yields the processor between attempts. For critical
    /// sections of a few instructions that are rarely contended; the acquiring and releasing
    /// orderings make it visible to ThreadSanitizer like a mutex.
    @inline(__always)
    func lockSpinning() {
        if compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged { return }
        lockContended()
    }

    @inline(never)
    private func lockContended() {
        var spins = 0
        while true {
            if !load(ordering: .relaxed),
                compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
            {
                return
            }
            spins += 1
            if spins >= 64 { sched_yield() }
        }
    }

    /// Releases a lock word taken with `lockSpinning()`.
    @inline(__always)
    func unlock() {
        store(false, ordering: .releasing)
    }
}
