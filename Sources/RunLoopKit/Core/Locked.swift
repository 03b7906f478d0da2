import Synchronization

// The package's locks: `Locked`, a value behind a pthread mutex, for everything; and `LockWord`,
// a word inside the object it guards (or `WordLocked`, a value behind one), only where a
// measurement showed it wins (each use says which figure). Both are visible to ThreadSanitizer:
// the mutex as a pthread mutex, the word through its acquiring and releasing atomics.

/// A value behind a `pthread_mutex_t`, in one allocation: the default lock of the library, its
/// demo and its tests (`LockWord` only where a measurement showed it wins).
///
/// Any thread. Used instead of `Synchronization.Mutex` because ThreadSanitizer understands
/// pthread mutexes: with `Mutex` (a bare futex on Linux) every access it protects is reported as a
/// race, and the sanitizer runs would be noise. A copy shares the value and the lock.
package struct Locked<Value>: @unchecked Sendable {
    private final class Storage: ManagedBuffer<Value, Platform.Mutex> {
        deinit {
            // ManagedBuffer destroys the header (the value) itself; the mutex is ours.
            withUnsafeMutablePointerToElements { Platform.destroyMutex($0) }
        }
    }

    private let storage: Storage

    /// A lock guarding `value`.
    package init(_ value: Value) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in value }
        let initialized = buffer.withUnsafeMutablePointerToElements { Platform.initializeMutex($0) }
        if case .failure(let failure) = initialized {
            preconditionFailure("RunLoopKit: pthread_mutex_init failed: \(failure)")
        }
        // ManagedBuffer.create returns the dynamic subclass instance.
        storage = unsafeDowncast(buffer, to: Storage.self)
    }

    /// Runs `body` with the value, holding the lock. `body` must not take this lock again.
    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { value, mutex in
            Platform.lockMutex(mutex)
            defer { Platform.unlockMutex(mutex) }
            return try body(&value.pointee)
        }
    }

    /// A copy of the value, read under the lock.
    package var current: Value { withLock { $0 } }

    /// Whether some thread holds the lock, for the debug-build check of a caller that must hold
    /// it (`assert(lock.isLocked)`): `pthread_mutex_trylock`, which fails while any thread holds
    /// it, the caller included, and lets it go at once when it succeeds.
    package var isLocked: Bool {
        storage.withUnsafeMutablePointerToElements { mutex in
            guard Platform.tryLockMutex(mutex) else { return true }
            Platform.unlockMutex(mutex)
            return false
        }
    }
}

/// A lock word stored in the object whose few fields it guards: no allocation of its own and the
/// same cache line as the fields. It spins briefly, then yields the processor between attempts,
/// so a contended thread never sleeps in the kernel for a lock that is free again nanoseconds
/// later, and a holder that was preempted gets to run. For critical sections of a few
/// instructions only.
@usableFromInline
struct LockWord: ~Copyable, @unchecked Sendable {
    @usableFromInline let word = Atomic<Bool>(false)

    @usableFromInline init() {}

    @inlinable @inline(__always)
    func lock() {
        if word.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged { return }
        lockContended()
    }

    @usableFromInline @inline(never)
    func lockContended() {
        var wait = SpinWait()
        while true {
            if !word.load(ordering: .relaxed),
                word.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
            {
                return
            }
            wait.pause()
        }
    }

    @inlinable @inline(__always)
    func unlock() {
        word.store(false, ordering: .releasing)
    }

    /// Whether some thread holds the word, for the debug-build check of a caller that must hold
    /// it: true for the holder, and a guess for anyone else.
    var isLocked: Bool { word.load(ordering: .relaxed) }

    /// Runs `body` holding the word. `body` must not take it again.
    @inline(__always)
    func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// Waiting for another thread that is a few instructions from done (a lock word's holder, a port's
/// sender between its claim and its write): spins briefly, then yields the processor between
/// looks, so that a thread that was preempted gets to run.
struct SpinWait {
    private var spins = 0

    mutating func pause() {
        spins += 1
        if spins >= 64 { Platform.yieldProcessor() } else { Platform.cpuRelax() }
    }
}

/// A value behind a `LockWord`, in one allocation: for a value whose lock is taken several times
/// per operation of a hot path and almost never contended. Unlocking is a plain store, where a
/// pthread mutex's unlock is a second atomic read-modify-write and both are calls into libc.
///
/// Any thread. `body` must not take this lock again. A critical section may be longer than a
/// `LockWord`'s usual few instructions (a waiter spins briefly, then yields the processor).
final class WordLocked<Value>: @unchecked Sendable {
    private let word = LockWord()
    /// Guarded by `word`, which makes the runtime's exclusivity checks redundant.
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock word.
    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try word.withLock { try body(&value) }
    }

    /// Whether some thread holds the lock word (see `LockWord.isLocked`).
    var isLocked: Bool { word.isLocked }
}
