import CGLibDriver
import Dispatch
import Foundation
import RunLoopKit
import Synchronization
import Testing

/// A RunLoopKit loop inside GLib's main loop, as a GTK program would run one: a GLib source polls
/// `Loop.backendDescriptor`, takes its timeout from `Loop.nextTimerFireDate(forMode:)`, and runs
/// the loop without sleeping when either comes. GLib's own timeouts keep running beside it.
@Suite struct GLibEmbeddingTests {
    /// What the C driver's callbacks reach through their context pointer.
    final class Driven: @unchecked Sendable {
        // @unchecked: used on the one thread that runs GLib's loop and the RunLoopKit loop.
        let loop: Loop
        var done: () -> Bool = { false }
        init(loop: Loop) { self.loop = loop }

        var millisecondsToNextTimer: Int32 {
            guard let next = loop.nextTimerFireDate(forMode: .default) else { return -1 }
            let wait = max(.zero, next - ContinuousClock.now)
            // Rounded up: a wake-up just before the timer's time would find nothing due.
            return Int32(clamping: (wait.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
                + Int32(clamping: wait.components.seconds * 1000)
        }
    }

    /// What happened, in order, from any thread.
    final class Events: Sendable {
        private let list = Mutex<[String]>([])
        func append(_ event: String) { list.withLock { $0.append(event) } }
        var all: [String] { list.withLock { $0 } }

        /// A duration one thread sets and another reads.
        final class Elapsed: Sendable {
            private let stored = Mutex<Duration?>(nil)
            func set(_ value: Duration) { stored.withLock { $0 = value } }
            var value: Duration? { stored.withLock { $0 } }
        }
    }

    @Test func glibsMainLoopDrivesALoop() throws {
        let finished = DispatchSemaphore(value: 0)
        let outcome = Mutex<(glib_driver_report, [String], Duration?, Duration?)?>(nil)
        Thread {
            let loop = Loop.current
            let events = Events()
            let start = ContinuousClock.now
            let firedAfter = Events.Elapsed()
            // A far timer keeps .default alive; a near one must fire at its time.
            let keeper = LoopTimer(after: .seconds(3600)) { _ in }
            loop.add(keeper, forMode: .default)
            let timer = LoopTimer(after: .milliseconds(100)) { _ in
                firedAfter.set(ContinuousClock.now - start)
                events.append("timer")
            }
            loop.add(timer, forMode: .default)
            // Another thread posts a block, then signals a source, while GLib waits.
            let source = LoopSource { events.append("signalled") }
            loop.add(source, forMode: .default)
            let postedAt = Events.Elapsed()
            Thread {
                usleep(300_000)
                postedAt.set(ContinuousClock.now - start)
                loop.perform { events.append("performed") }
                usleep(100_000)
                source.signal()
            }.start()

            let driven = Driven(loop: loop)
            driven.done = { events.all.count >= 3 }
            let context = Unmanaged.passUnretained(driven).toOpaque()
            let report = glib_driver_run(
                loop.backendDescriptor,
                { context in Unmanaged<Driven>.fromOpaque(context!).takeUnretainedValue().millisecondsToNextTimer },
                { context in
                    let driven = Unmanaged<Driven>.fromOpaque(context!).takeUnretainedValue()
                    driven.loop.run(mode: .default, for: .zero)
                    return driven.done() ? 0 : 1
                },
                context, 20_000)
            withExtendedLifetime(driven) {}
            let servedAfterPost = postedAt.value.map { ContinuousClock.now - start - $0 }
            keeper.invalidate()
            source.invalidate()
            outcome.withLock {
                $0 = (report, events.all, firedAfter.value, servedAfterPost)
            }
            finished.signal()
        }.start()
        finished.wait()
        let (report, events, firedAfter, servedAfterPost) = try #require(outcome.withLock { $0 })
        #expect(report.timed_out == 0)
        #expect(events == ["timer", "performed", "signalled"])
        // The timer fired at its time, not before, not seconds late.
        #expect(
            firedAfter.map { $0 >= .milliseconds(100) && $0 < .seconds(2) } == true, "\(String(describing: firedAfter))"
        )
        #expect(servedAfterPost.map { $0 < .seconds(5) } == true)
        // GLib slept between the events instead of spinning, and served its own timeout meanwhile.
        #expect(report.dispatches < 50, "\(report.dispatches) dispatches")
        #expect(report.readable >= 2)
        #expect(report.glib_ticks > 5)
    }
}
