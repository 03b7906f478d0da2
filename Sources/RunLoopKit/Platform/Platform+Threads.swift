import Glibc

// Threads: creating, joining and telling them apart, their thread-specific slots, mutexes and
// yielding the processor (pthread, sched_yield), each call wrapped once. pthread calls return their
// error number instead of setting errno, and none fails with EINTR (POSIX forbids it), nor does
// sched_yield, so nothing here is made again. The lock, unlock and thread-identity wrappers are
// `@inline(__always)`, so that `Locked` and the thread checks cost no instruction more than the
// calls written in place.

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

// MARK: Thread-specific values

extension Platform {
    /// A thread-specific slot, as `makeThreadKey(destructor:)` gives it.
    typealias ThreadKey = pthread_key_t

    /// Creates a thread-specific slot (`pthread_key_create`): `destructor` runs at each thread's
    /// exit with that thread's value if it is not nil, after glibc has cleared the slot. Fails
    /// with its error number (`EAGAIN`: the process's keys ran out).
    static func makeThreadKey(
        destructor: @convention(c) (UnsafeMutableRawPointer?) -> Void
    ) -> Result<ThreadKey, Errno> {
        var key = pthread_key_t()
        return errorNumber(pthread_key_create(&key, destructor)).map { key }
    }

    /// Sets the calling thread's value of `key` (`pthread_setspecific`). Fails with its error
    /// number (`ENOMEM`).
    @discardableResult
    static func setThreadValue(_ value: UnsafeMutableRawPointer?, for key: ThreadKey) -> Result<Void, Errno> {
        errorNumber(pthread_setspecific(key, value))
    }
}

// MARK: Mutexes and yielding

extension Platform {
    /// A mutex (`pthread_mutex_t`), used in place: its memory is the caller's and never moves.
    typealias Mutex = pthread_mutex_t

    /// Where a `Mutex` lives.
    typealias MutexPointer = UnsafeMutablePointer<Mutex>

    /// Initializes the memory at `mutex` as a default mutex (`pthread_mutex_init`). Fails with its
    /// error number (`ENOMEM`).
    static func initializeMutex(_ mutex: MutexPointer) -> Result<Void, Errno> {
        mutex.initialize(to: Mutex())
        return errorNumber(pthread_mutex_init(mutex, nil))
    }

    /// Destroys an unlocked mutex (`pthread_mutex_destroy`); the memory stays the caller's.
    static func destroyMutex(_ mutex: MutexPointer) {
        _ = pthread_mutex_destroy(mutex)
    }

    /// Locks `mutex`, waiting for it (`pthread_mutex_lock`). A default mutex fails only on
    /// programmer errors glibc does not check for it, so nothing is returned.
    @inline(__always)
    static func lockMutex(_ mutex: MutexPointer) {
        _ = pthread_mutex_lock(mutex)
    }

    /// Unlocks `mutex`, held by the calling thread (`pthread_mutex_unlock`).
    @inline(__always)
    static func unlockMutex(_ mutex: MutexPointer) {
        _ = pthread_mutex_unlock(mutex)
    }

    /// Locks `mutex` if no thread (the caller included) holds it (`pthread_mutex_trylock`): true
    /// if it did.
    static func tryLockMutex(_ mutex: MutexPointer) -> Bool {
        pthread_mutex_trylock(mutex) == 0
    }

    /// Lets another ready thread run on this processor (`sched_yield`, which cannot fail on Linux).
    static func yieldProcessor() {
        _ = sched_yield()
    }
}
