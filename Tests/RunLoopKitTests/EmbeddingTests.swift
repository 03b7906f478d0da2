import Foundation
import Glibc
import OuterLoops
import RunLoopKit
import Synchronization
import Testing

/// A loop driven by another loop: `nextTimerFireDate(forMode:)` as the other loop's timeout and
/// `backendDescriptor` polled by a plain `epoll_wait` loop, which runs the loop without sleeping
/// when it is readable.
@Suite struct EmbeddingTests {
    /// The earliest of a mode's timers and of the scheduled blocks that may run in it; nil for a
    /// mode with neither.
    @Test func nextTimerFireDateIsTheModesEarliestTimerOrScheduledBlock() {
        onFreshThread {
            let loop = Loop.current
            let custom = Loop.Mode("embedding-custom")
            let start = ContinuousClock.now
            let timer = LoopTimer(after: .seconds(50)) { _ in }
            loop.add(timer, forMode: .default)
            #expect(loop.nextTimerFireDate(forMode: .default) == timer.fireDate)
            #expect(loop.nextTimerFireDate(forMode: custom) == nil)

            // A block for the common modes is due in .default (a common mode), not in `custom`.
            let common = loop.schedule(after: .seconds(30)) {}
            let inCommon = loop.nextTimerFireDate(forMode: .default)
            #expect(inCommon.map { $0 >= start + .seconds(30) && $0 <= ContinuousClock.now + .seconds(30) } == true)
            #expect(loop.nextTimerFireDate(forMode: custom) == nil)

            // A block for `custom` only is `custom`'s, and earlier than the rest.
            let named = loop.schedule(after: .seconds(20), inModes: [custom]) {}
            let inCustom = loop.nextTimerFireDate(forMode: custom)
            #expect(inCustom.map { $0 >= start + .seconds(20) && $0 <= ContinuousClock.now + .seconds(20) } == true)
            #expect(loop.nextTimerFireDate(forMode: .default) == inCommon)
            // `.common` asks the common modes: `custom` is not one.
            #expect(loop.nextTimerFireDate(forMode: .common) == inCommon)

            // Asked from another thread, the answer is the same.
            let fromElsewhere = onFreshThread { loop.nextTimerFireDate(forMode: custom) }
            #expect(fromElsewhere == inCustom)

            // Cancelled and invalidated, they are gone.
            named.cancel()
            common.cancel()
            #expect(loop.nextTimerFireDate(forMode: custom) == nil)
            #expect(loop.nextTimerFireDate(forMode: .default) == timer.fireDate)
            timer.invalidate()
            #expect(loop.nextTimerFireDate(forMode: .default) == nil)
        }
    }

    /// An `epoll_wait` loop drives a RunLoopKit loop: a timer fires at its time, a block posted
    /// and a source signalled from other threads end the outer wait at once (its timeout being
    /// the timer's far date), a ready descriptor is served, and with nothing to do the backend's
    /// descriptor is not readable (the outer loop does not spin).
    @Test func anEpollLoopDrivesTheLoop() {
        onFreshThread {
            let loop = Loop.current
            let backend = loop.backendDescriptor
            #expect(backend >= 0)
            let outer = outer_epoll_watching(backend)
            #expect(outer >= 0)
            defer { close(outer) }

            let events = Recorder<String>()
            var outerWakeUps = 0
            /// Waits on the outer epoll until the loop's next timer (at most `limit`), then runs
            /// the loop without sleeping; returns whether the backend's descriptor was readable.
            func step(limit: Duration = .seconds(10)) -> Bool {
                var timeout = limit
                if let next = loop.nextTimerFireDate(forMode: .default) {
                    timeout = min(timeout, max(.zero, next - ContinuousClock.now))
                }
                let milliseconds = Int32(
                    timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000 + 1)
                let count = outer_epoll_wait(outer, milliseconds)
                outerWakeUps += 1
                loop.run(mode: .default, for: .zero)
                return count > 0
            }

            // A timer, with a far one beside it that keeps .default alive.
            let keeper = LoopTimer(after: .seconds(3600)) { _ in }
            loop.add(keeper, forMode: .default)
            let firedAt = Locked<ContinuousClock.Instant?>(nil)
            let timer = LoopTimer(after: .milliseconds(50)) { _ in firedAt.withLock { $0 = .now } }
            let due = timer.fireDate
            loop.add(timer, forMode: .default)
            while firedAt.withLock({ $0 }) == nil, outerWakeUps < 100 { _ = step() }
            let fired = firedAt.withLock { $0 }
            #expect(fired.map { $0 >= due && $0 < due + .seconds(2) } == true, "\(String(describing: fired))")
            #expect(outerWakeUps < 10, "\(outerWakeUps) outer wake-ups for one timer")

            // A block posted from another thread ends a wait whose timeout is an hour away.
            let posted = ContinuousClock.now
            Thread {
                usleep(50_000)
                loop.perform { events.append("performed") }
            }.start()
            var readable = false
            while events.events.isEmpty, ContinuousClock.now - posted < .seconds(20) { readable = step() || readable }
            #expect(events.events == ["performed"])
            #expect(readable)
            #expect(ContinuousClock.now - posted < .seconds(10))
            // Served, the wake-up leaves nothing readable behind (no descriptor is watched yet, so
            // only the loop's own eventfd and timerfd are in the backend).
            #expect(outer_epoll_wait(outer, 100) == 0)

            // A custom source signalled from another thread.
            let source = LoopSource { events.append("signalled") }
            loop.add(source, forMode: .default)
            let signalled = ContinuousClock.now
            Thread {
                usleep(50_000)
                source.signal()
            }.start()
            while events.events.count < 2, ContinuousClock.now - signalled < .seconds(20) { _ = step() }
            #expect(events.events == ["performed", "signalled"])

            // A descriptor made readable by another thread.
            let pair = SocketPair()
            let watched = try! LoopDescriptorSource(fileDescriptor: pair.left, events: .readable) { _, _ in
                var byte: UInt8 = 0
                _ = read(pair.left, &byte, 1)
                events.append("readable")
            }
            loop.add(watched, forMode: .default)
            let written = ContinuousClock.now
            Thread {
                usleep(50_000)
                var byte: UInt8 = 1
                _ = write(pair.right, &byte, 1)
            }.start()
            while events.events.count < 3, ContinuousClock.now - written < .seconds(20) { _ = step() }
            #expect(events.events == ["performed", "signalled", "readable"])

            // Nothing to do: the backend's descriptor is not readable, so the outer loop sleeps.
            loop.run(mode: .default, for: .zero)
            #expect(outer_epoll_wait(outer, 100) == 0)

            // A source signalled on the loop's own thread, outside a run, makes it readable.
            source.signal()
            #expect(outer_epoll_wait(outer, 1000) == 1)
            loop.run(mode: .default, for: .zero)
            #expect(events.events.last == "signalled")
            #expect(outer_epoll_wait(outer, 100) == 0)

            watched.invalidate()
            source.invalidate()
            keeper.invalidate()
        }
    }

    /// InsideAnotherLoop.md's program: its own `poll` loop drives `Loop.current` on the main
    /// thread; three timers fire in order, a block posted from another thread is served, the loop
    /// ends when no timer is left, and the program sleeps in `poll` meanwhile.
    @Test func theDocsPollLoopProgramServesItsTimersAndPostsThenEnds() async throws {
        let outcome = try await expectProgram("example-inside-another-loop", within: .seconds(5))
        #expect(outcome.lines.filter { $0.hasPrefix("tick") } == ["tick 1", "tick 2", "tick 3"], "\(outcome)")
        #expect(outcome.lines.contains("posted from another thread"), "\(outcome)")
        #expect(outcome.lines.last == "done", "\(outcome)")
    }
}
