import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// A descriptor epoll cannot watch is refused when the source is made, with the errno epoll gave,
/// never left as a source that silently never fires.
@Suite struct UnwatchableDescriptorTests {
    /// What making a source over `descriptor` throws, or nil if it made one.
    private func refusal(of descriptor: Int32) -> LoopError? {
        do {
            _ = try LoopDescriptorSource(fileDescriptor: descriptor, events: .readable) { _, _ in }
            return nil
        } catch {
            return error
        }
    }

    /// `/dev/null`, as standard input is under nohup, cron or systemd: a character device epoll
    /// refuses (EPERM).
    @Test func devNullIsRefusedWithEPERM() throws {
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let error = try #require(refusal(of: descriptor), "a source was made over /dev/null")
        #expect(error.systemError == EPERM)
        #expect(error.message.contains("descriptor \(descriptor)"))
    }

    @Test(arguments: ["regular file", "directory"])
    func filesAndDirectoriesAreRefusedWithEPERM(kind: String) throws {
        let path = NSTemporaryDirectory() + "runloopkit-unwatchable-\(getpid()).txt"
        let descriptor =
            kind == "directory" ? open("/", O_RDONLY | O_CLOEXEC) : open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        try #require(descriptor >= 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        let error = try #require(refusal(of: descriptor), "a source was made over a \(kind)")
        #expect(error.systemError == EPERM)
        #expect(error.message.contains("\(kind)"))
    }

    @Test func aClosedDescriptorIsRefusedWithEBADF() throws {
        // A number no descriptor can have: one closed here could be reused by a parallel test.
        let error = try #require(refusal(of: Int32.max - 1))
        #expect(error.systemError == EBADF)
    }

    /// A pipe is watchable: accepted, and its readiness served.
    @Test func aPipeIsAcceptedAndServed() throws {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { for end in ends { close(end) } }
        let reader = ends[0]
        #expect(write(ends[1], "x", 1) == 1)
        let served = onFreshThread { () -> Bool in
            let loop = Loop.current
            var served = false
            guard
                let source = try? LoopDescriptorSource(
                    fileDescriptor: reader, events: .readable,
                    loop.isolated { source, _ in
                        served = true
                        source.invalidate()
                    })
            else { return false }
            loop.add(source, forMode: .default)
            _ = loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true)
            return served
        }
        #expect(served)
    }

    /// A source that epoll stops watching later (its descriptor closed under the loop) handled
    /// nothing: the run does not report `.handledSource`.
    @Test func aSourceThatFailsLaterIsNotAHandledSource() throws {
        let pair = SocketPair()
        let outcome = onFreshThread { () -> (Loop.RunResult, Bool)? in
            let loop = Loop.current
            // A number just under the limit: see DescriptorSourceTests.
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            let high = Int32(clamping: max(700, Int(clamping: limit.rlim_cur) - 80))
            let doomed = fcntl(pair.left, F_DUPFD_CLOEXEC, high)
            guard doomed >= high,
                let source = try? LoopDescriptorSource(fileDescriptor: doomed, events: .readable, { _, _ in })
            else { return nil }
            close(doomed)
            loop.add(source, forMode: .default)
            let keepAlive = LoopTimer(after: .seconds(10)) { _ in }
            loop.add(keepAlive, forMode: .default)
            defer { keepAlive.invalidate() }
            let result = loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: true)
            return (result, source.isValid)
        }
        let (result, valid) = try #require(outcome)
        #expect(!valid)
        #expect(result == .timedOut)
    }
}
