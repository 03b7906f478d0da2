import Foundation
import Testing

@testable import RunLoopKit

/// `LoopHangMonitor`: reports stretches of work longer than the threshold, with the phase and the
/// callout that took the time, and nothing else.
@Suite struct HangMonitorTests {
    /// Runs `.default` for `duration` with a 10 ms repeating timer and a block posted from another
    /// thread, plus `extra` items; returns the reports of a 20 ms monitor.
    static func watch(
        for duration: Duration = .milliseconds(200), invalidateFirst: Bool = false,
        _ extra: @escaping @Sendable (Loop) -> Void = { _ in }
    ) -> (reports: [LoopHangMonitor.Report], wasValid: Bool) {
        let reports = Recorder<LoopHangMonitor.Report>()
        let valid = onFreshThread {
            let loop = Loop.current
            let monitor = LoopHangMonitor(loop: loop, threshold: .milliseconds(20)) { reports.append($0) }
            let wasValid = monitor.isValid
            if invalidateFirst { monitor.invalidate() }
            let ticker = LoopTimer(after: .milliseconds(10), repeating: .milliseconds(10)) { _ in }
            loop.add(ticker, forMode: .default)
            whenAsleep(loop) { loop.perform {} }
            extra(loop)
            loop.run(mode: .default, for: duration)
            ticker.invalidate()
            monitor.invalidate()
            return wasValid && !monitor.isValid
        }
        return (reports.events, valid)
    }

    @Test func catchesAFiftyMillisecondStallInATimer() throws {
        let (reports, valid) = Self.watch { loop in
            let stall = LoopTimer(after: .milliseconds(50)) { _ in usleep(50_000) }
            loop.add(stall, forMode: .default)
        }
        #expect(valid)
        try #require(reports.count == 1, "reports: \(reports)")
        let report = reports[0]
        #expect(report.slowestCallout == .timer)
        #expect(report.slowestCalloutDuration >= .milliseconds(50))
        #expect(report.duration >= report.slowestCalloutDuration)
        #expect(report.duration < .milliseconds(500))
        // Timers fire after waking up, or after beforeSources when the timer was already due as the
        // iteration began (a loaded machine): either way the slow stretch follows that phase.
        #expect(report.phase == .afterWaiting || report.phase == .beforeSources)
        #expect(report.phaseDuration >= .milliseconds(50))
        #expect(report.mode == .default)
        #expect(report.callouts >= 1)
        #expect(report.description.contains("timer"))
    }

    @Test func staysSilentWithoutAStall() {
        let (reports, valid) = Self.watch { loop in
            for delay in [15, 35, 55] {
                loop.add(LoopTimer(after: .milliseconds(delay)) { _ in usleep(1000) }, forMode: .default)
            }
        }
        #expect(valid)
        #expect(reports.isEmpty, "reports: \(reports)")
    }

    @Test func namesASlowObserverAndItsPhase() throws {
        let (reports, _) = Self.watch { loop in
            var stalled = false
            let slow = LoopObserver(activities: .beforeSources) { _, _ in
                guard !stalled else { return }
                stalled = true
                usleep(30_000)
            }
            loop.add(slow, forMode: .default)
        }
        // A loaded machine may stall the thread elsewhere too (the monitor rightly reports that):
        // the observer's stall is the one report that names an observer.
        let observers = reports.filter { $0.slowestCallout == .observer }
        try #require(observers.count == 1, "reports: \(reports)")
        #expect(observers[0].phase == .beforeSources)
        #expect(observers[0].slowestCalloutDuration >= .milliseconds(30))
        #expect(reports.count <= 3, "reports: \(reports)")
    }

    @Test func aStalledBlockInATrackingRunIsReportedInThatMode() throws {
        let reports = Recorder<LoopHangMonitor.Report>()
        onFreshThread {
            let loop = Loop.current
            let monitor = LoopHangMonitor(loop: loop, threshold: .milliseconds(20)) { reports.append($0) }
            loop.add(LoopSource {}, forMode: .tracking)
            whenAsleep(loop) { loop.perform(inModes: [.tracking]) { usleep(40_000) } }
            loop.run(mode: .tracking, for: .milliseconds(150))
            monitor.invalidate()
        }
        let all = reports.events
        try #require(all.count == 1, "reports: \(all)")
        #expect(all[0].slowestCallout == .block)
        #expect(all[0].mode == .tracking)
        #expect(all[0].slowestCalloutDuration >= .milliseconds(40))
    }

    @Test func reportsNothingOnceInvalidated() {
        let (reports, valid) = Self.watch(invalidateFirst: true) { loop in
            loop.add(LoopTimer(after: .milliseconds(30)) { _ in usleep(50_000) }, forMode: .default)
        }
        #expect(valid)
        #expect(reports.isEmpty)
    }

    @Test func aNestedRunThatSleepsSplitsTheStretch() {
        // A callout running the loop again, which sleeps there, is not one long piece of work:
        // only the stall inside the nested run is reported.
        let reports = Recorder<LoopHangMonitor.Report>()
        onFreshThread {
            let loop = Loop.current
            let monitor = LoopHangMonitor(loop: loop, threshold: .milliseconds(20)) { reports.append($0) }
            let modal = Loop.Mode("modal")
            loop.add(LoopTimer(after: .milliseconds(40)) { _ in usleep(30_000) }, forMode: modal)
            loop.add(LoopSource {}, forMode: modal)
            let outer = LoopTimer(after: .milliseconds(5)) { _ in
                loop.run(mode: modal, for: .milliseconds(120))
            }
            loop.add(outer, forMode: .default)
            loop.run(mode: .default, for: .milliseconds(200))
            monitor.invalidate()
        }
        let all = reports.events
        #expect(all.count == 1, "reports: \(all)")
        #expect(all.first?.slowestCallout == .timer)
        #expect(all.first?.mode == Loop.Mode("modal"))
        #expect((all.first?.slowestCalloutDuration ?? .zero) < .milliseconds(100))
    }
}
