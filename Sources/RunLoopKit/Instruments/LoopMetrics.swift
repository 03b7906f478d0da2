import Synchronization

/// Counters of what a loop did since metrics were turned on: iterations, time busy and time
/// waiting (libuv's "idle time"), callouts by kind, how long posted work (blocks, jobs, port
/// messages) waited in the queue, and connections its listeners shed.
///
/// A value: read `loop.metrics` from any thread for a snapshot.
public struct LoopMetrics: Sendable, Equatable {
    /// Iterations of the loop's runs.
    public var iterations: UInt64 = 0
    /// Time spent in runs outside the kernel wait.
    public var busyTime: Duration = .zero
    /// Time spent asleep in the kernel.
    public var waitingTime: Duration = .zero
    /// Callouts made, by kind (kinds with none are absent).
    public var callouts: [LoopCalloutKind: UInt64] = [:]
    /// Queue delay of posted work: `queueDelay[i]` counts delays in [2^i, 2^(i+1)) nanoseconds
    /// (bucket 0 also holds 0 ns; the last bucket everything longer).
    public var queueDelay: [UInt64] = Array(repeating: 0, count: LoopMetrics.bucketCount)
    /// Connections the loop's listeners shed: accepted and closed at once because the process had
    /// run out of descriptors (see `LoopListener.shedConnections`, which counts one listener's
    /// since it was made).
    public var shedConnections: UInt64 = 0

    /// Number of queue-delay buckets (2^0 ns … 2^39 ns ≈ 9 minutes).
    public static let bucketCount = 40

    /// The number of delays measured.
    public var queueDelayCount: UInt64 { queueDelay.reduce(0, +) }

    /// An upper bound of the `fraction` quantile of the queue delay (e.g. 0.99), from the buckets.
    public func queueDelayQuantile(_ fraction: Double) -> Duration? {
        let total = queueDelayCount
        guard total > 0 else { return nil }
        let rank = UInt64((Double(total) * min(max(fraction, 0), 1)).rounded(.up))
        var seen: UInt64 = 0
        for (bucket, count) in queueDelay.enumerated() {
            seen += count
            if seen >= max(rank, 1) { return .nanoseconds(Int64(1) << (bucket + 1)) }
        }
        return .nanoseconds(Int64(1) << LoopMetrics.bucketCount)
    }
}

/// The instrument behind `loop.metrics`: fixed-size counters behind one lock, so recording never
/// allocates.
final class MetricsRecorder: LoopInstrument, @unchecked Sendable {
    struct Counters {
        var iterations: UInt64 = 0
        var busy: Int64 = 0
        var waiting: Int64 = 0
        var callouts: InlineArray<8, UInt64> = .init(repeating: 0)
        var delays: InlineArray<40, UInt64> = .init(repeating: 0)
        var shed: UInt64 = 0
    }

    private let counters = Locked(Counters())
    // Loop thread only: where the current busy or waiting stretch began (ticks; 0 = none).
    private var busySince: Ticks = 0
    private var waitSince: Ticks = 0

    var snapshot: LoopMetrics {
        let counters = counters.withLock { $0 }
        var metrics = LoopMetrics()
        metrics.iterations = counters.iterations
        metrics.busyTime = .nanoseconds(counters.busy)
        metrics.waitingTime = .nanoseconds(counters.waiting)
        for kind in LoopCalloutKind.allCases where counters.callouts[kind.rawValue] > 0 {
            metrics.callouts[kind] = counters.callouts[kind.rawValue]
        }
        for bucket in 0..<LoopMetrics.bucketCount {
            metrics.queueDelay[bucket] = counters.delays[bucket]
        }
        metrics.shedConnections = counters.shed
        return metrics
    }

    /// A listener of the loop shed a connection. Loop thread.
    func recordShedConnection() {
        counters.withLock { $0.shed += 1 }
    }

    func loopDidReach(_ loop: Loop, _ activity: Loop.Activity, mode: Loop.Mode, at time: ContinuousClock.Instant) {
        let now = TickClock.ticks(time)
        if activity == .entry {
            busySince = now
        } else if activity == .exit, busySince != 0 {
            let busy = now - busySince
            busySince = 0
            counters.withLock { $0.busy += busy }
        }
    }

    func loopWillIterate(_ loop: Loop, mode: Loop.Mode, at time: ContinuousClock.Instant) {
        if busySince == 0 { busySince = TickClock.ticks(time) }
        counters.withLock { $0.iterations += 1 }
    }

    func loopWillWait(_ loop: Loop, at time: ContinuousClock.Instant) {
        let busy = switchStretch(from: &busySince, to: &waitSince, at: time)
        counters.withLock { $0.busy += busy }
    }

    func loopDidWait(_ loop: Loop, at time: ContinuousClock.Instant) {
        let waited = switchStretch(from: &waitSince, to: &busySince, at: time)
        counters.withLock { $0.waiting += waited }
    }

    /// Ends the stretch that started at `ending` (0: none), starts `starting` now; returns how long
    /// the ended stretch lasted.
    private func switchStretch(from ending: inout Ticks, to starting: inout Ticks, at time: ContinuousClock.Instant)
        -> Ticks
    {
        let now = TickClock.ticks(time)
        defer {
            ending = 0
            starting = now
        }
        return ending == 0 ? 0 : now - ending
    }

    func loopDidCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant) {
        counters.withLock { $0.callouts[kind.rawValue] += 1 }
    }

    func loopDidDequeue(_ loop: Loop, _ kind: LoopCalloutKind, queueDelay: Duration) {
        let nanoseconds = UInt64(queueDelay.saturatingNanoseconds)
        let bucket = min(LoopMetrics.bucketCount - 1, max(0, 63 - nanoseconds.leadingZeroBitCount))
        counters.withLock { $0.delays[bucket] += 1 }
    }
}

extension Loop {
    /// Whether the loop counts what it does (see `metrics`). Off by default: off, it costs one
    /// branch per hook.
    ///
    /// Any thread; takes effect at the loop's next iteration. Turning it on again starts from zero.
    public var collectsMetrics: Bool {
        get { metricsRecorder.withLock { $0 != nil } }
        set {
            let (added, removed): (MetricsRecorder?, MetricsRecorder?) = metricsRecorder.withLock { recorder in
                if newValue, recorder == nil {
                    recorder = MetricsRecorder()
                    return (recorder, nil)
                }
                if !newValue, let old = recorder {
                    recorder = nil
                    return (nil, old)
                }
                return (nil, nil)
            }
            if let added { attach(added) }
            if let removed { detach(removed) }
        }
    }

    /// A snapshot of the loop's counters since `collectsMetrics` was turned on (all zero if off).
    ///
    /// Any thread.
    public var metrics: LoopMetrics {
        metricsRecorder.withLock { $0?.snapshot } ?? LoopMetrics()
    }

    /// Counts a connection a listener of this loop shed, while metrics are on. Loop thread.
    func recordShedConnection() {
        metricsRecorder.withLock { $0 }?.recordShedConnection()
    }
}
