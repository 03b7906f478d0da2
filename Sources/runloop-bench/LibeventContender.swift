import CRawLibevent
import Dispatch

/// The workloads written directly on libevent in C (`Sources/CRawLibevent`): the practical floor.
enum LibeventContender: Contender {
    static var version: String { String(cString: raw_libevent_version()) }

    /// How many processors this process may run on (`sched_getaffinity`); 0 if unknown.
    static var allowedProcessors: Int { Int(raw_allowed_processors()) }

    /// A cache line's round trip between two processors, in nanoseconds, averaged over `rounds`
    /// (`raw_core_round_trip_ns`); nil on one processor.
    static func coreRoundTripNanoseconds(rounds: Int = 20_000) -> Double? {
        let nanoseconds = raw_core_round_trip_ns(Int32(rounds))
        return nanoseconds > 0 ? nanoseconds : nil
    }

    /// C has no captures: both `capture` cases run the same workload.
    static func postThroughput(
        producers: Int, blocks: Int, capture: PostCapture, pinnedTo processors: PostProcessors?, timeout: Double
    ) -> Outcome<Double> {
        let result = raw_post_throughput(
            Int32(producers), Int64(blocks), timeout, processors?.loop ?? -1, processors?.producers ?? -1)
        guard result.ok != 0, result.seconds > 0 else {
            return .failure(processors == nil ? .timedOut : BenchError(reason: "timed out, or could not pin"))
        }
        return .success(Double(result.count) / result.seconds)
    }

    static func pingPong(roundTrips: Int, timeout: Double) -> Outcome<[Double]> {
        var times = [Double](repeating: .nan, count: roundTrips)
        let result = times.withUnsafeMutableBufferPointer { buffer in
            raw_pingpong(Int32(roundTrips), buffer.baseAddress, timeout)
        }
        guard result.ok != 0, Int(result.completed) == roundTrips else { return .failure(.timedOut) }
        return .success(times)
    }

    static func timers(offsets: [Double], lead: Double, timeout: Double) -> Outcome<TimerRun> {
        let spread = offsets.max() ?? 0
        let run = onFreshThread(timeout: lead + spread + timeout + 10) { () -> Outcome<TimerRun> in
            var lateness = [Double](repeating: .nan, count: offsets.count)
            let result = offsets.withUnsafeBufferPointer { offsets in
                lateness.withUnsafeMutableBufferPointer { lateness in
                    raw_timers(Int32(offsets.count), offsets.baseAddress, lead, lateness.baseAddress, timeout)
                }
            }
            guard result.ok != 0 else { return .failure(.timedOut) }
            return .success(
                TimerRun(
                    scheduleSeconds: result.schedule_seconds, scheduleEndOffset: result.schedule_end_offset,
                    lateness: lateness))
        }
        return run ?? .failure(.timedOut)
    }

    static func timerChurn(timers: Int, window: Int) -> Outcome<Double> {
        let result = onFreshThread(timeout: 600) { raw_timer_churn(Int64(timers), Int32(window)) }
        guard let result, result.ok != 0 else { return .failure(.timedOut) }
        return .success(result.seconds)
    }

    static func iteration(seconds: Double, observers: Int) -> Outcome<Double> {
        let result = onFreshThread(timeout: seconds + 30) { raw_iteration(seconds, Int32(observers)) }
        guard let result, result.ok != 0, result.seconds > 0 else { return .failure(.timedOut) }
        return .success(Double(result.iterations) / result.seconds)
    }

    static func descriptorPingPong(roundTrips: Int, timeout: Double) -> Outcome<Double> {
        let result = raw_fd_pingpong(Int32(roundTrips), timeout)
        guard result.ok != 0, result.seconds > 0 else { return .failure(.timedOut) }
        return .success(Double(result.round_trips) / result.seconds)
    }

    private final class Idle: IdleProbe, @unchecked Sendable {
        let handle: UnsafeMutableRawPointer
        init(handle: UnsafeMutableRawPointer) { self.handle = handle }
        var wakeUps: Int { Int(raw_idle_wakeups(handle)) }
        func stop() -> Bool { raw_idle_stop(handle) != 0 }
    }

    static func startIdle(withTimer: Bool) -> Outcome<any IdleProbe> {
        guard let handle = raw_idle_start(withTimer ? 1 : 0) else {
            return .failure(BenchError(reason: "raw loop did not start"))
        }
        return .success(Idle(handle: handle))
    }

    static func memoryPerTimer(count: Int) -> Outcome<Double> {
        let bytes = onFreshThread(timeout: 600) { () -> Double? in
            // Warm up this thread's heap, then measure from a trimmed heap.
            if let warm = raw_timer_set_new(1_000) {
                raw_timer_set_fill(warm)
                raw_timer_set_free(warm)
            }
            guard let set = raw_timer_set_new(Int32(count)) else { return nil }
            raw_malloc_trim()
            let before = residentBytes()
            raw_timer_set_fill(set)
            let after = residentBytes()
            raw_timer_set_free(set)
            return Double(after - before) / Double(count)
        }
        guard let bytes, let bytes else { return .failure(.timedOut) }
        return .success(bytes)
    }

    static func memoryPerLoop(count: Int) -> Outcome<Double> {
        raw_malloc_trim()
        let before = residentBytes()
        guard let loops = raw_loops_start(Int32(count)) else {
            return .failure(BenchError(reason: "raw loops did not start"))
        }
        sleep(seconds: 0.05)
        let after = residentBytes()
        raw_loops_stop(loops)
        return .success(Double(after - before) / Double(count))
    }
}
