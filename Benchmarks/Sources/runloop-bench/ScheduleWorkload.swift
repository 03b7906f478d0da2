import CoreFoundation
import Foundation
import RunLoopKit

// Workload 11: cancellable one-shot blocks, scheduled and cancelled from the loop's own thread.
// RunLoopKit's `schedule(after:)` against each library's one-shot timer, created, added and
// freed (the closest each has to a block for later that can be cancelled).

extension MetricID {
    static let scheduleCancel = "schedule.cancel"
    static let scheduleHalfFired = "schedule.halffired"
}

/// What the fired blocks count: the loop's thread alone touches it, and the block reaches it
/// through a global as the C peers' callbacks reach theirs, so that it captures nothing.
private nonisolated(unsafe) var scheduledFired = 0

/// Runs `pass` until `firing` blocks have fired (for ten minutes at most): the seconds since
/// `start`, or nil if they did not all fire.
private func runUntilFired(_ firing: Int, since start: Double, _ pass: () -> Void) -> Double? {
    let deadline = start + 600
    while scheduledFired < firing && monotonicSeconds() < deadline { pass() }
    let end = monotonicSeconds()
    return scheduledFired == firing ? end - start : nil
}

extension RunLoopKitContender {
    static func scheduleCancel(blocks: Int, fireHalf: Bool) -> Outcome<Double> {
        let seconds = onFreshThread(timeout: 600) { () -> Double? in
            let loop = Loop.current
            scheduledFired = 0
            var firing = 0
            let start = monotonicSeconds()
            for index in 0..<blocks {
                if fireHalf {
                    let scheduled = loop.schedule(after: .zero) { scheduledFired += 1 }
                    if index & 1 == 1 { firing += 1 } else { scheduled.cancel() }
                } else {
                    loop.schedule(after: .seconds(3600)) {}.cancel()
                }
            }
            return runUntilFired(firing, since: start) { loop.run(mode: .default, for: .seconds(1)) }
        }
        guard let seconds, let seconds else { return .failure(.timedOut) }
        return .success(seconds)
    }
}

extension FoundationContender {
    /// The most blocks the half-fired row is run with: CFRunLoop keeps a mode's timers in a sorted
    /// array and removes each fired one from its front, so the row's cost grows with the square
    /// of the pending count (40,000 blocks already run at 24 k/s, 1,000,000 would take hours).
    static let halfFiredLimit = 50_000

    static func scheduleCancel(blocks: Int, fireHalf: Bool) -> Outcome<Double> {
        if fireHalf && blocks > halfFiredLimit {
            return .failure(
                BenchError(
                    reason:
                        "not run above \(halfFiredLimit) blocks: CFRunLoop removes each fired timer from the front of a sorted array, quadratic in the pending count"
                ))
        }
        let seconds = onFreshThread(timeout: 600) { () -> Double? in
            let runLoop = CFRunLoopGetCurrent()
            let mode: CFRunLoopMode = kCFRunLoopDefaultMode
            scheduledFired = 0
            var firing = 0
            let start = monotonicSeconds()
            let fireDate = CFAbsoluteTimeGetCurrent() + (fireHalf ? 0 : 3600)
            for index in 0..<blocks {
                let timer = CFRunLoopTimerCreateWithHandler(nil, fireDate, 0, 0, 0) { _ in scheduledFired += 1 }
                CFRunLoopAddTimer(runLoop, timer, mode)
                if fireHalf && index & 1 == 1 { firing += 1 } else { CFRunLoopTimerInvalidate(timer) }
            }
            return runUntilFired(firing, since: start) { _ = CFRunLoopRunInMode(mode, 1, false) }
        }
        guard let seconds, let seconds else { return .failure(.timedOut) }
        return .success(seconds)
    }
}

extension CPeerContender {
    static func scheduleCancel(blocks: Int, fireHalf: Bool) -> Outcome<Double> {
        let result = onFreshThread(timeout: 600) { peer.pointee.schedule_cancel(Int64(blocks), fireHalf ? 1 : 0) }
        guard let result, result.ok != 0 else { return .failure(.timedOut) }
        return .success(result.seconds)
    }
}

extension Workloads {
    static let schedule = Workload(
        number: 14, name: "schedule", title: "Scheduled blocks: schedule and cancel",
        metrics: [
            Metric(
                id: MetricID.scheduleCancel, label: "scheduled blocks, scheduled and cancelled", unit: "blocks/s",
                direction: .higherIsBetter, notes: oneShotTimers),
            Metric(
                id: MetricID.scheduleHalfFired, label: "scheduled blocks, half cancelled, half fired",
                unit: "blocks/s", direction: .higherIsBetter, notes: oneShotTimers),
        ], curves: [],
        how: [
            .runLoopKit:
                "`loop.schedule(after: .seconds(3600)) {}` then `.cancel()` per block, on the loop's thread; the second row schedules each `after: .zero` (the block adds to a counter), cancels every other one at once, then `run`s until the others ran",
            .foundation:
                "`CFRunLoopTimerCreateWithHandler` (one-shot) + `CFRunLoopAddTimer`, then `CFRunLoopTimerInvalidate`; the second row: due now, every other one invalidated, then `CFRunLoopRunInMode`",
            .libevent:
                "`event_new` + `event_add` (an hour away) + `event_free`; the second row: due now, every other one freed at once, the others freed in their callback, `event_base_loop(EVLOOP_ONCE)`",
            .libuv:
                "malloc'd `uv_timer_t`: `uv_timer_init` + `uv_timer_start` + `uv_close` (freed by its close callback; `uv_run(UV_RUN_NOWAIT)` every 1,000 runs them); the second row: timeout 0, every other one closed at once, the others closed in their callback, `uv_run`",
            .glib:
                "`g_timeout_source_new` + `g_source_attach`, then `g_source_destroy` + `g_source_unref`; the second row: interval 0, every other one destroyed at once, the others removed by their callback, `g_main_context_iteration`",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            for (fireHalf, id) in [(false, MetricID.scheduleCancel), (true, MetricID.scheduleHalfFired)] {
                sample.record(
                    id,
                    implementation.contender.scheduleCancel(blocks: size.scheduledBlocks, fireHalf: fireHalf).map {
                        Double(size.scheduledBlocks) / $0
                    })
            }
            return sample
        })

    /// The peers have no cancellable block for later: their one-shot timer stands in for it.
    static let oneShotTimers: [Implementation: String] = [
        .foundation: "no cancellable block for later: a one-shot `CFRunLoopTimer`, added and invalidated",
        .libevent: "no cancellable block for later: a one-shot timer event, allocated, added and freed",
        .libuv: "no cancellable block for later: a malloc'd one-shot `uv_timer_t`, started and closed",
        .glib: "no cancellable block for later: a one-shot timeout `GSource`, attached and destroyed",
    ]
}
