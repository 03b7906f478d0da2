import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// The Platform wrappers of libevent's failures, of threads, mutexes and thread-specific slots, and
/// of reading short files.
@Suite struct PlatformWrapperTests {
    /// A libevent call fails with the errno of the system call that failed inside it.
    @Test func aLibeventFailureCarriesTheErrnoOfItsSystemCall() {
        // close(-1) is the failing system call here, as epoll_ctl is inside event_add.
        let failed = Platform.libevent { close(-1) }
        #expect(failed == .failure(LibeventFailure(systemError: Errno(EBADF))))
        let missing = Platform.libevent { () -> OpaquePointer? in
            _ = close(-1)
            return nil
        }
        #expect(missing == .failure(LibeventFailure(systemError: Errno(EBADF))))
    }

    /// A failure of libevent's own sets no errno: an older errno is not reported as its cause, and
    /// a success is a success whatever errno says.
    @Test func aFailureWithoutASystemCallReportsNoErrno() {
        _ = close(-1)  // leaves EBADF behind
        #expect(Platform.libevent { Int32(-1) } == .failure(LibeventFailure(systemError: nil)))
        _ = close(-1)
        #expect(Platform.libevent { Int32(1) } == .success(1))
        let error = Platform.libevent { Int32(-1) }.mapError { failure in
            LoopError("event_add failed (\(failure))", systemError: failure.systemError?.code)
        }
        #expect(throws: LoopError.self) { try error.get() }
        if case .failure(let made) = error {
            #expect(made.systemError == nil)
            #expect(made.message == "event_add failed (inside libevent, no errno)")
        }
    }

    /// A started thread runs its body and is joined; it is not the calling thread.
    @Test func aStartedThreadRunsAndIsJoined() throws {
        let ran = Atomic<Bool>(false)
        let sawItself = Atomic<Bool>(false)
        let thread = try Platform.startThread {
            ran.store(true, ordering: .releasing)
            sawItself.store(Platform.isCurrentThread(Platform.currentThread), ordering: .releasing)
        }.get()
        #expect(!Platform.isCurrentThread(thread))
        #expect(Platform.isCurrentThread(Platform.currentThread))
        Platform.joinThread(thread)
        let didRun = ran.load(ordering: .acquiring)
        let wasItself = sawItself.load(ordering: .acquiring)
        #expect(didRun)
        #expect(wasItself)
    }

    /// A thread-specific value is the setting thread's only, and the key's destructor gets it when
    /// that thread exits.
    @Test func aThreadValueBelongsToItsThreadAndIsGivenBackAtExit() throws {
        let key = try Platform.makeThreadKey { raw in
            guard let raw else { return }
            raw.assumingMemoryBound(to: Atomic<Int>.self).pointee.store(1, ordering: .releasing)
        }.get()
        let flag = UnsafeMutablePointer<Atomic<Int>>.allocate(capacity: 1)
        flag.initialize(to: Atomic<Int>(0))
        defer { flag.deallocate() }
        let address = Int(bitPattern: flag)
        let sawOwn = Atomic<Bool>(false)
        let thread = try Platform.startThread {
            let raw = UnsafeMutableRawPointer(bitPattern: address)
            _ = Platform.setThreadValue(raw, for: key)
            sawOwn.store(pthread_getspecific(key) == raw, ordering: .releasing)
        }.get()
        Platform.joinThread(thread)
        let own = sawOwn.load(ordering: .acquiring)
        let givenBack = flag.pointee.load(ordering: .acquiring)
        #expect(pthread_getspecific(key) == nil)
        #expect(own)
        #expect(givenBack == 1)
        _ = pthread_key_delete(key)
    }

    /// A try-lock fails while the mutex is held, by the caller too, and succeeds once it is not.
    @Test func aMutexRefusesATryLockWhileHeld() throws {
        let mutex = Platform.MutexPointer.allocate(capacity: 1)
        defer { mutex.deallocate() }
        try Platform.initializeMutex(mutex).get()
        Platform.lockMutex(mutex)
        #expect(!Platform.tryLockMutex(mutex))
        Platform.unlockMutex(mutex)
        #expect(Platform.tryLockMutex(mutex))
        Platform.unlockMutex(mutex)
        Platform.destroyMutex(mutex)
    }

    /// A short /proc file is read whole, a symbolic link's target is read, and a missing file fails
    /// with ENOENT.
    @Test func shortFilesAndLinksAreRead() throws {
        let link = try Platform.linkTarget("/proc/self").get()
        #expect(link == String(Platform.processID))
        let status = try Platform.readShortFile("/proc/self/stat", limit: 64).get()
        #expect(status.count == 64)
        #expect(status.starts(with: Array("\(Platform.processID) (".utf8)))
        #expect(Platform.readShortFile("/proc/self/no-such-file", limit: 64) == .failure(Errno(ENOENT)))
        #expect(Platform.linkTarget("/proc/self/no-such-link") == .failure(Errno(ENOENT)))
    }
}
