import CoreFoundation
import Foundation
import RunLoopKit

// Workload 15: items at scale. Tens of thousands of timers, then as many custom event sources,
// added to one loop of the calling thread and then all removed in a shuffled order, so that a
// removal that searches the mode's items (O(n) each, O(n²) in all) shows. The items are created
// before the clock starts and released after it stops; the loop does not run.

extension MetricID {
    static let scaleTimers = "scale.timers"
    static let scaleSources = "scale.sources"
    static let scaleFloor = "scale.floor"
}

/// What a scale row adds and removes.
enum ScaleItems: Sendable {
    /// Timers an hour away (jittered as in the churn), so that none is due.
    case timers
    /// Custom event sources, never signalled.
    case sources
}

extension Workloads {
    /// The order in which the scale rows remove their `count` items: one pseudo-random permutation
    /// (a Fisher–Yates shuffle driven by a xorshift64* generator with a fixed seed), the same for
    /// every implementation and every run.
    static func scaleRemovalOrder(count: Int) -> [Int32] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var order = (0..<count).map { Int32($0) }
        for index in stride(from: count - 1, to: 0, by: -1) {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            order.swapAt(index, Int((state &* 0x2545_F491_4F6C_DD1D) % UInt64(index + 1)))
        }
        return order
    }
}

extension RunLoopKitContender {
    static func itemsAtScale(_ items: ScaleItems, removalOrder: [Int32]) -> Outcome<Double> {
        let seconds = onFreshThread(timeout: 600) { () -> Double in
            let loop = Loop.current
            switch items {
            case .timers:
                let base = ContinuousClock.now + .seconds(3600)
                let timers = removalOrder.indices.map { index in
                    LoopTimer(fireAt: base + .microseconds(churnJitterMicroseconds(index))) { _ in }
                }
                let start = monotonicSeconds()
                for timer in timers { loop.add(timer, forMode: .default) }
                for index in removalOrder { timers[Int(index)].invalidate() }
                return monotonicSeconds() - start
            case .sources:
                let sources = removalOrder.indices.map { _ in LoopSource {} }
                let start = monotonicSeconds()
                for source in sources { loop.add(source, forMode: .default) }
                for index in removalOrder { sources[Int(index)].invalidate() }
                return monotonicSeconds() - start
            }
        }
        return seconds.map { .success($0) } ?? .failure(.timedOut)
    }
}

extension RunLoopKitContender {
    /// The floor of the scale rows in Swift: nothing added or removed, only a retain and a release
    /// of each source, reached through the array in the removal order, as the rows' own loops
    /// reach them. An atomic operation on a line not in the cache waits for that line, where the
    /// C loops' plain loads and stores of their handles overlap their misses.
    static func itemsAtScaleFloor(removalOrder: [Int32]) -> Outcome<Double> {
        let seconds = onFreshThread(timeout: 600) { () -> Double in
            let sources = removalOrder.indices.map { _ in LoopSource {} }
            let start = monotonicSeconds()
            for index in removalOrder { withExtendedLifetime(sources[Int(index)]) {} }
            return monotonicSeconds() - start
        }
        return seconds.map { .success($0) } ?? .failure(.timedOut)
    }
}

extension FoundationContender {
    static func itemsAtScale(_ items: ScaleItems, removalOrder: [Int32]) -> Outcome<Double> {
        let seconds = onFreshThread(timeout: 600) { () -> Double in
            let runLoop = CFRunLoopGetCurrent()
            let mode: CFRunLoopMode = kCFRunLoopDefaultMode
            switch items {
            case .timers:
                let base = CFAbsoluteTimeGetCurrent() + 3600
                let timers = removalOrder.indices.map { index in
                    let fireDate = base + Double(churnJitterMicroseconds(index)) * 1e-6
                    return CFRunLoopTimerCreateWithHandler(nil, fireDate, 0, 0, 0) { _ in }!
                }
                let start = monotonicSeconds()
                for timer in timers { CFRunLoopAddTimer(runLoop, timer, mode) }
                for index in removalOrder { CFRunLoopTimerInvalidate(timers[Int(index)]) }
                return monotonicSeconds() - start
            case .sources:
                let sources = removalOrder.indices.map { _ in makeKeepAliveSource() }
                let start = monotonicSeconds()
                for source in sources { CFRunLoopAddSource(runLoop, source, mode) }
                for index in removalOrder { CFRunLoopSourceInvalidate(sources[Int(index)]) }
                return monotonicSeconds() - start
            }
        }
        return seconds.map { .success($0) } ?? .failure(.timedOut)
    }
}

extension CPeerContender {
    static func itemsAtScale(_ items: ScaleItems, removalOrder: [Int32]) -> Outcome<Double> {
        peerItemsAtScale(items, removalOrder: removalOrder)
    }

    /// The peer's `items_at_scale`, on a fresh thread.
    static func peerItemsAtScale(_ items: ScaleItems, removalOrder: [Int32]) -> Outcome<Double> {
        let result = onFreshThread(timeout: 600) {
            removalOrder.withUnsafeBufferPointer { order in
                peer.pointee.items_at_scale(Int32(order.count), order.baseAddress, items == .sources ? 1 : 0)
            }
        }
        guard let result, result.ok != 0 else { return .failure(.timedOut) }
        return .success(result.seconds)
    }
}

extension LibeventContender {
    static func itemsAtScale(_ items: ScaleItems, removalOrder: [Int32]) -> Outcome<Double> {
        guard items == .timers else {
            return .failure(
                BenchError(
                    reason:
                        "libevent has no custom event sources: an event activated by hand (`event_active`) is never added to a base"
                ))
        }
        return peerItemsAtScale(items, removalOrder: removalOrder)
    }
}

extension Workloads {
    static let scale = Workload(
        number: 15, name: "scale", title: "Items at scale: add, then remove in random order",
        metrics: [
            Metric(
                id: MetricID.scaleTimers, label: "items at scale, timers", unit: "items/s",
                direction: .higherIsBetter),
            Metric(
                id: MetricID.scaleSources, label: "items at scale, sources", unit: "items/s",
                direction: .higherIsBetter,
                notes: [
                    .libevent: "no custom event sources: not measured",
                    .libuv:
                        "no custom event sources: `uv_async_t` handles, never sent to (`uv_async_init` adds one, `uv_close` removes it)",
                ]),
            Metric(
                id: MetricID.scaleFloor, label: "items at scale, floor: a retain of each source", unit: "items/s",
                direction: .higherIsBetter,
                notes: [
                    .foundation: "a floor of Swift's reference counting, measured for RunLoopKit only",
                    .libevent: "a floor of Swift's reference counting, measured for RunLoopKit only",
                    .libuv: "a floor of Swift's reference counting, measured for RunLoopKit only",
                    .glib: "a floor of Swift's reference counting, measured for RunLoopKit only",
                ]),
        ], curves: [],
        how: [
            .runLoopKit:
                "`LoopTimer(fireAt:)` (an hour away, jittered) + `loop.add(_:forMode: .default)` of each, then `invalidate()` of each in a shuffled order; the sources row: `LoopSource {}`, the same; created before the clock starts; the floor row: nothing added, `withExtendedLifetime(sources[i]) {}` of each source in the shuffled order",
            .foundation:
                "`CFRunLoopTimerCreateWithHandler` before the clock starts, `CFRunLoopAddTimer` of each, then `CFRunLoopTimerInvalidate` in the shuffled order; sources: a version-0 `CFRunLoopSource` whose perform does nothing, `CFRunLoopAddSource`, then `CFRunLoopSourceInvalidate`",
            .libevent:
                "`evtimer_new` before the clock starts, `event_add` of each, then `event_del` in the shuffled order (`event_free` after the clock stops); no sources row",
            .libuv:
                "`uv_timer_init` before the clock starts, `uv_timer_start` of each, then `uv_timer_stop` in the shuffled order; sources: `uv_async_init` of each, then `uv_close` in the shuffled order and the `uv_run(UV_RUN_NOWAIT)` that runs their close callbacks",
            .glib:
                "`g_timeout_source_new` before the clock starts, `g_source_attach` of each, then `g_source_destroy` in the shuffled order (`g_source_unref` after the clock stops); sources: a custom `GSource` (`g_source_new`, prepare and check return FALSE), the same",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let order = scaleRemovalOrder(count: size.scaleItems)
            for (items, id) in [(ScaleItems.timers, MetricID.scaleTimers), (.sources, MetricID.scaleSources)] {
                sample.record(
                    id,
                    implementation.contender.itemsAtScale(items, removalOrder: order).map {
                        Double(size.scaleItems) / $0
                    })
            }
            if implementation == .runLoopKit {
                sample.record(
                    MetricID.scaleFloor,
                    RunLoopKitContender.itemsAtScaleFloor(removalOrder: order).map { Double(size.scaleItems) / $0 })
            }
            return sample
        })
}
