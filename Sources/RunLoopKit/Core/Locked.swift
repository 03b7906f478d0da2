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

/// A value behind a lock word (`Atomic<Bool>.lockSpinning()`) in the same object, so that the
/// word and the value share a cache line.
///
/// For the loop's inbox: every posting thread takes it for an append of a few instructions, and
/// the loop thread for a pointer swap. Against a pthread mutex it saves two calls per post and
/// a second cache line, and a contended thread never sleeps in the kernel for a lock that is
/// free again nanoseconds later (it yields the processor after a short spin instead, so a holder
/// that was preempted gets to run). The acquiring and releasing orderings make it visible to
/// ThreadSanitizer like a mutex.
final class WordLocked<Value>: @unchecked Sendable {
    private let word = Atomic<Bool>(false)
    // Guarded by `word`: the runtime's exclusivity checks would only repeat what the lock ensures.
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock word. `body` must not take it again.
    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        word.lockSpinning()
        defer { word.unlock() }
        return try body(&value)
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
            if spins >= 64 {
                sched_yield()
            } else {
                Platform.cpuRelax()
            }
        }
    }

    /// Releases a lock word taken with `lockSpinning()`.
    @inline(__always)
    func unlock() {
        store(false, ordering: .releasing)
    }
}
