import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// The Platform wrappers of libevent's failures and of threads.
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
}
