import Foundation
import Testing

@testable import RunLoopKit

@Suite struct DescriptorSourceTests {
    @Test func readableDescriptorIsServedAndCountsAsHandled() throws {
        let pair = SocketPair()
        let received = Recorder<[UInt8]>()
        let result = try onFreshThread { () -> Result<Loop.RunResult, LoopError> in
            let loop = Loop.current
            do {
                let source = try LoopDescriptorSource(fileDescriptor: pair.left, events: .readable) { _, events in
                    #expect(events == .readable)
                    received.append(pair.drain(pair.left))
                }
                loop.add(source, forMode: .default)
                pair.send(42, from: pair.right)
                let result = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
                source.invalidate()
                return .success(result)
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(result == .handledSource)
        #expect(received.events == [[42]])
    }

    @Test func readinessFromAnotherThreadWakesTheLoop() throws {
        let pair = SocketPair()
        let elapsed = try onFreshThread { () -> Result<Duration, LoopError> in
            let loop = Loop.current
            do {
                let source = try LoopDescriptorSource(fileDescriptor: pair.left, events: .readable) { source, _ in
                    _ = pair.drain(pair.left)
                    source.invalidate()
                }
                loop.add(source, forMode: .default)
                let start = ContinuousClock.now
                whenAsleep(loop) { pair.send(1, from: pair.right) }
                let result = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
                #expect(result == .handledSource)
                return .success(ContinuousClock.now - start)
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(elapsed < .seconds(1))
    }

    @Test func writableIsReportedOnlyWhileAskedFor() throws {
        let pair = SocketPair()
        let calls = Recorder<LoopDescriptorSource.Events>()
        try onFreshThread { () -> Result<Void, LoopError> in
            let loop = Loop.current
            do {
                let source = try LoopDescriptorSource(fileDescriptor: pair.left, events: .writable) { source, events in
                    calls.append(events)
                    // Output flushed: stop asking for writability.
                    source.events = []
                }
                loop.add(source, forMode: .default)
                #expect(
                    loop.run(mode: .default, for: .milliseconds(100), returnAfterSourceHandled: true) == .handledSource)
                // Nothing asked for: the run times out without callouts.
                #expect(loop.run(mode: .default, for: .milliseconds(50)) == .timedOut)
                source.events = .writable
                #expect(
                    loop.run(mode: .default, for: .milliseconds(100), returnAfterSourceHandled: true) == .handledSource)
                source.invalidate()
                return .success(())
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(calls.events == [.writable, .writable])
    }

    /// Eight descriptors become ready while the loop is busy in a callout: the next pass serves all
    /// of them (Foundation on Linux serves one per wake-up, so it would take eight passes).
    @Test func everyReadyDescriptorIsServedInOnePass() throws {
        let pairs = (0..<8).map { _ in SocketPair() }
        let served = Recorder<(index: Int, pass: Int)>()
        try onFreshThread { () -> Result<Void, LoopError> in
            let loop = Loop.current
            var pass = 0
            let passes = LoopObserver(activities: .beforeTimers, loop.isolated { _, _ in pass += 1 })
            loop.add(passes, forMode: .default)
            do {
                var sources: [LoopDescriptorSource] = []
                for (index, pair) in pairs.enumerated() {
                    let source = try LoopDescriptorSource(
                        fileDescriptor: pair.left, events: .readable,
                        loop.isolated { _, _ in
                            _ = pair.drain(pair.left)
                            served.append((index, pass))
                        })
                    loop.add(source, forMode: .default)
                    sources.append(source)
                }
                // Hold the loop in a block while another thread makes all eight readable.
                loop.perform {
                    let written = DispatchSemaphore(value: 0)
                    Thread.detachNewThread {
                        for pair in pairs { pair.send(7, from: pair.right) }
                        written.signal()
                    }
                    written.wait()
                }
                _ = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
                _ = loop.run(mode: .default, for: .milliseconds(50))
                for source in sources { source.invalidate() }
                passes.invalidate()
                return .success(())
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(Set(served.events.map(\.index)) == Set(0..<8))
        #expect(served.count == 8)
        #expect(Set(served.events.map(\.pass)).count == 1, "served over passes \(served.events.map(\.pass))")
    }

    /// A descriptor that stays readable while its mode is not running is neither lost nor spun on.
    @Test func outOfModeReadinessWaitsWithoutSpinning() throws {
        let pair = SocketPair()
        let received = Recorder<[UInt8]>()
        let iterations = Recorder<Int>()
        try onFreshThread { () -> Result<Void, LoopError> in
            let loop = Loop.current
            do {
                let source = try LoopDescriptorSource(fileDescriptor: pair.left, events: .readable) { _, _ in
                    received.append(pair.drain(pair.left))
                }
                loop.add(source, forMode: .default)
                // Registered in .default first, so libevent knows the descriptor.
                #expect(loop.run(mode: .default, for: .milliseconds(10)) == .timedOut)
                let other = Loop.Mode("other")
                loop.add(LoopSource {}, forMode: other)
                loop.add(LoopObserver(activities: .beforeTimers) { _, _ in iterations.append(1) }, forMode: other)
                pair.send(9, from: pair.right)
                #expect(loop.run(mode: other, for: .milliseconds(300)) == .timedOut)
                #expect(received.events.isEmpty)
                // Back in .default: the byte is still there.
                #expect(loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true) == .handledSource)
                source.invalidate()
                return .success(())
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(received.events == [[9]])
        // A spinning loop would iterate thousands of times in 300 ms.
        #expect(iterations.count <= 5)
    }

    @Test func modeFilteringAndCommonModes() throws {
        let pair = SocketPair()
        let modes = Recorder<String>()
        try onFreshThread { () -> Result<Void, LoopError> in
            let loop = Loop.current
            do {
                let source = try LoopDescriptorSource(fileDescriptor: pair.left, events: .readable) { _, _ in
                    _ = pair.drain(pair.left)
                    modes.append(Loop.current.currentMode?.name ?? "none")
                }
                loop.add(source, forMode: .common)
                #expect(loop.contains(source, inMode: .tracking))
                pair.send(1, from: pair.right)
                #expect(loop.run(mode: .tracking, for: .seconds(2), returnAfterSourceHandled: true) == .handledSource)
                loop.remove(source, forMode: .common)
                #expect(!loop.contains(source, inMode: .default))
                pair.send(2, from: pair.right)
                #expect(loop.run(mode: .default, for: .milliseconds(50)) == .finished)
                loop.add(source, forMode: .default)
                #expect(loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true) == .handledSource)
                source.invalidate()
                return .success(())
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(modes.events == ["tracking", "default"])
    }

    @Test(arguments: ["closed", "negative", "regular file", "directory"])
    func badDescriptorsThrowAClearError(kind: String) throws {
        var descriptor: Int32 = -1
        var cleanup: (() -> Void)?
        switch kind {
        case "closed":
            // A number no descriptor can have (far above any descriptor limit): one closed here
            // could be reused at once by a test running in parallel (it was, under
            // AddressSanitizer, and the source was then created on it).
            descriptor = Int32.max - 1
        case "negative":
            descriptor = -5
        case "regular file":
            let path = NSTemporaryDirectory() + "runloopkit-\(getpid()).txt"
            descriptor = open(path, O_CREAT | O_RDWR, 0o600)
            cleanup = {
                close(descriptor)
                unlink(path)
            }
        default:
            descriptor = open("/", O_RDONLY)
            cleanup = { close(descriptor) }
        }
        defer { cleanup?() }
        do {
            _ = try LoopDescriptorSource(fileDescriptor: descriptor, events: .readable) { _, _ in }
            Issue.record("expected a LoopError for a \(kind) descriptor")
        } catch {
            #expect(error.message.contains("descriptor \(descriptor)"))
        }
    }

    /// A descriptor closed while registered fails its source with an error; the loop's other
    /// items keep working.
    @Test func descriptorClosedUnderTheLoopFailsOnlyItsSource() throws {
        let pair = SocketPair()
        let ticks = Recorder<Int>()
        let (valid, error) = try onFreshThread { () -> Result<(Bool, LoopError?), LoopError> in
            let loop = Loop.current
            do {
                // A number just under the process's limit: tests running in parallel open the
                // lowest free ones (a thousand and more at a time in `ConnectionLoadTests`), so none
                // of them reuses it between the close and the add below.
                var limit = rlimit()
                getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
                let high = Int32(clamping: max(700, Int(clamping: limit.rlim_cur) - 64))
                let doomed = fcntl(pair.left, F_DUPFD_CLOEXEC, high)
                try #require(doomed >= high)
                let source = try LoopDescriptorSource(fileDescriptor: doomed, events: .readable) { _, _ in }
                close(doomed)
                loop.add(source, forMode: .default)
                loop.add(LoopTimer(after: .milliseconds(5)) { _ in ticks.append(1) }, forMode: .default)
                _ = loop.run(mode: .default, for: .milliseconds(100))
                return .success((source.isValid, source.error))
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(!valid)
        #expect(error?.message.contains("descriptor") == true)
        #expect(ticks.count == 1)
    }

    @Test func invalidateFromAnotherThreadStopsCallouts() throws {
        let pair = SocketPair()
        let calls = Recorder<Int>()
        try onFreshThread { () -> Result<Void, LoopError> in
            let loop = Loop.current
            do {
                let source = try LoopDescriptorSource(fileDescriptor: pair.left, events: .readable) { _, _ in
                    calls.append(1)
                }
                loop.add(source, forMode: .default)
                loop.add(LoopSource {}, forMode: .default)
                whenAsleep(loop) {
                    source.invalidate()
                    pair.send(3, from: pair.right)
                }
                _ = loop.run(mode: .default, for: .milliseconds(200))
                #expect(!loop.contains(source, inMode: .default))
                return .success(())
            } catch {
                return .failure(error as? LoopError ?? LoopError("\(error)"))
            }
        }.get()
        #expect(calls.count == 0)
    }
}
