import Foundation
import Testing

@testable import RunLoopKit

/// Bad input either works as documented or gives a clear error, and the loop's other items keep
/// working.
@Suite struct BadInputTests {
    @Test(arguments: [Duration.seconds(-5), .zero, .nanoseconds(-1)])
    func zeroOrNegativeTimeoutsPollOnce(timeout: Duration) {
        let (result, elapsed) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let start = ContinuousClock.now
            return (loop.run(mode: .default, for: timeout), ContinuousClock.now - start)
        }
        #expect(result == .timedOut)
        #expect(elapsed < .milliseconds(500))
    }

    /// An enormous timeout means "no deadline": the run ends by stop, not by overflow.
    @Test(arguments: [Duration.seconds(Int64.max), .seconds(1 << 40)])
    func enormousTimeoutsDoNotOverflow(timeout: Duration) {
        let result = onFreshThread {
            let loop = Loop.current
            loop.add(LoopTimer(after: .milliseconds(5)) { _ in loop.stop() }, forMode: .default)
            loop.add(LoopSource {}, forMode: .default)
            return loop.run(mode: .default, for: timeout)
        }
        #expect(result == .stopped)
    }

    /// Timers with a fire date far in the past, a negative delay, an enormous delay, or enormous
    /// intervals and tolerances: the past ones fire at once, the far ones never, nothing traps.
    @Test func extremeTimerDatesAndIntervals() {
        let fired = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            let past = LoopTimer(fireAt: .now - .seconds(3_600)) { _ in fired.append("past") }
            let negative = LoopTimer(after: .seconds(-10)) { _ in fired.append("negative") }
            let never = LoopTimer(after: .seconds(Int64.max)) { _ in fired.append("never") }
            let hugeInterval = LoopTimer(
                after: .zero, repeating: .seconds(Int64.max), tolerance: .seconds(Int64.max)
            ) { _ in fired.append("huge interval") }
            for timer in [past, negative, never, hugeInterval] { loop.add(timer, forMode: .default) }
            _ = loop.run(mode: .default, for: .milliseconds(50))
            #expect(never.isValid)
            #expect(hugeInterval.isValid)
            never.invalidate()
            hugeInterval.invalidate()
        }
        #expect(Set(fired.events) == ["past", "negative", "huge interval"])
        #expect(fired.count == 3)
    }

    /// 10,000 custom modes: items in all of them, each mode served on its own.
    @Test func tenThousandCustomModes() {
        let count = 10_000
        let served = Recorder<Int>()
        onFreshThread {
            let loop = Loop.current
            let modes = (0..<count).map { Loop.Mode("custom-\($0)") }
            let sources = (0..<count).map { index in LoopSource { served.append(index) } }
            for (mode, source) in zip(modes, sources) {
                loop.add(source, forMode: mode)
                source.signal()
            }
            for index in stride(from: 0, to: count, by: 997) {
                #expect(loop.run(mode: modes[index], for: .zero) == .timedOut)
            }
            #expect(loop.run(mode: "custom-unknown", for: .zero) == .finished)
        }
        #expect(served.events == Array(stride(from: 0, to: count, by: 997)))
    }

    /// Adding an item twice, to a mode it is already in, or removing what was never added:
    /// documented no-ops, one callout per signal.
    @Test func doubleAddsAndStrayRemovesAreNoOps() {
        let calls = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            let source = LoopSource { calls.append("source") }
            let timer = LoopTimer(after: .zero) { _ in calls.append("timer") }
            let observer = LoopObserver(activities: .entry) { _, _ in calls.append("entry") }
            let stray = LoopSource {}
            loop.remove(stray, forMode: .default)
            loop.remove(timer, forMode: .tracking)
            for _ in 0..<3 {
                loop.add(source, forMode: .default)
                loop.add(source, forMode: .common)
                loop.add(timer, forMode: .default)
                loop.add(timer, forMode: .common)
                loop.add(observer, forMode: .default)
                loop.add(observer, forMode: .common)
            }
            #expect(!loop.contains(stray, inMode: .default))
            source.signal()
            _ = loop.run(mode: .default, for: .zero)
            // Invalidated items added again are ignored.
            timer.invalidate()
            loop.add(timer, forMode: .default)
            #expect(!loop.contains(timer, inMode: .default))
        }
        #expect(calls.events.filter { $0 == "entry" }.count == 1)
        #expect(calls.events.filter { $0 == "source" }.count == 1)
        #expect(calls.events.filter { $0 == "timer" }.count == 1)
    }

    /// A failed system call reports its errno, comparable without parsing the message.
    @Test func aClosedDescriptorIsRefusedWithItsErrno() {
        // A number no descriptor can have (far above any descriptor limit): a closed one could be
        // reused by another test running meanwhile.
        let notOpen = Int32.max - 1
        #expect(throws: LoopError.self) {
            _ = try LoopDescriptorSource(fileDescriptor: notOpen, events: .readable) { _, _ in }
        }
        do {
            _ = try LoopDescriptorSource(fileDescriptor: notOpen, events: .readable) { _, _ in }
        } catch {
            #expect(error.systemError == EBADF)
            #expect(error.message.contains("EBADF"))
            #expect(error != LoopError(error.message))
            #expect(error == LoopError(error.message, systemError: EBADF))
        }
    }
}
