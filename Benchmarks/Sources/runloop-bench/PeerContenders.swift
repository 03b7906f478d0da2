import CRawGLib
import CRawLibevent
import CRawLibuv
import CRawPeer
import Dispatch

/// The workloads written in C on an event library, each in that library's own idiom: a
/// `raw_peer` function table (`Sources/CRawPeer`, and a target per library).
protocol CPeerContender: Contender, SendableMetatype {
    static var peer: UnsafePointer<raw_peer> { get }
}

/// Raw libevent in C (`Sources/CRawLibevent`): the practical floor.
enum LibeventContender: CPeerContender {
    static var peer: UnsafePointer<raw_peer> { raw_libevent_peer() }

    /// How many processors this process may run on (`sched_getaffinity`); 0 if unknown.
    static var allowedProcessors: Int { Int(raw_allowed_processors()) }

    /// A cache line's round trip between two processors, in nanoseconds, averaged over `rounds`
    /// (`raw_core_round_trip_ns`); nil on one processor.
    static func coreRoundTripNanoseconds(rounds: Int = 20_000) -> Double? {
        let nanoseconds = raw_core_round_trip_ns(Int32(rounds))
        return nanoseconds > 0 ? nanoseconds : nil
    }
}

/// libuv in C (`Sources/CRawLibuv`).
enum LibuvContender: CPeerContender {
    static var peer: UnsafePointer<raw_peer> { raw_libuv_peer() }
}

/// GLib's main loop in C (`Sources/CRawGLib`).
enum GLibContender: CPeerContender {
    static var peer: UnsafePointer<raw_peer> { raw_glib_peer() }
}

extension CPeerContender {
    /// The library's version.
    static var version: String { String(cString: peer.pointee.version()!) }

    /// C has no captures: the shared-object and capture-free cases run the same workload; the
    /// typical case posts the same values a typical closure captures.
    static func postThroughput(
        producers: Int, blocks: Int, capture: PostCapture, pinnedTo processors: PostProcessors?, timeout: Double
    ) -> Outcome<Double> {
        let result = raw_peer_post_throughput(
            peer, Int32(producers), Int64(blocks), capture.isTypical ? 1 : 0, timeout, processors?.loop ?? -1,
            processors?.producers ?? -1)
        guard result.ok != 0, result.seconds > 0 else {
            return .failure(processors == nil ? .timedOut : BenchError(reason: "timed out, or could not pin"))
        }
        return .success(Double(result.count) / result.seconds)
    }

    static func pingPong(roundTrips: Int, timeout: Double) -> Outcome<[Double]> {
        var times = [Double](repeating: .nan, count: roundTrips)
        let result = times.withUnsafeMutableBufferPointer { buffer in
            raw_peer_pingpong(peer, Int32(roundTrips), buffer.baseAddress, timeout)
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
                    peer.pointee.timers(
                        Int32(offsets.count), offsets.baseAddress, lead, lateness.baseAddress, timeout)
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
        let result = onFreshThread(timeout: 600) { peer.pointee.timer_churn(Int64(timers), Int32(window)) }
        guard let result, result.ok != 0 else { return .failure(.timedOut) }
        return .success(result.seconds)
    }

    static func iteration(seconds: Double, observers: Int) -> Outcome<Double> {
        let result = onFreshThread(timeout: seconds + 30) { peer.pointee.iteration(seconds, Int32(observers)) }
        guard let result, result.ok != 0, result.seconds > 0 else { return .failure(.timedOut) }
        return .success(Double(result.iterations) / result.seconds)
    }

    static func descriptorPingPong(roundTrips: Int, timeout: Double) -> Outcome<Double> {
        let result = raw_peer_fd_pingpong(peer, Int32(roundTrips), timeout)
        guard result.ok != 0, result.seconds > 0 else { return .failure(.timedOut) }
        return .success(Double(result.round_trips) / result.seconds)
    }

    static func startIdle(withTimer: Bool) -> Outcome<any IdleProbe> {
        guard let handle = raw_peer_idle_start(peer, withTimer ? 1 : 0) else {
            return .failure(BenchError(reason: "raw loop did not start"))
        }
        return .success(PeerIdle(handle: handle))
    }

    static func memoryPerTimer(count: Int) -> Outcome<Double> {
        let bytes = onFreshThread(timeout: 600) { () -> Double? in
            let table = peer.pointee
            // Warm up this thread's heap, then measure from a trimmed heap.
            if let warm = table.timer_set_new(1_000) {
                table.timer_set_fill(warm)
                table.timer_set_free(warm)
            }
            guard let set = table.timer_set_new(Int32(count)) else { return nil }
            raw_malloc_trim()
            let before = residentBytes()
            table.timer_set_fill(set)
            let after = residentBytes()
            table.timer_set_free(set)
            return Double(after - before) / Double(count)
        }
        guard let bytes, let bytes else { return .failure(.timedOut) }
        return .success(bytes)
    }

    static func memoryPerLoop(count: Int) -> Outcome<Double> {
        // The first loops fault in the library's code pages: not the cost of one more loop.
        guard let warmUp = raw_peer_loops_start(peer, Int32(memoryWarmUpLoops)) else {
            return .failure(BenchError(reason: "raw loops did not start"))
        }
        raw_peer_loops_stop(warmUp)
        raw_malloc_trim()
        let before = residentBytes()
        guard let loops = raw_peer_loops_start(peer, Int32(count)) else {
            return .failure(BenchError(reason: "raw loops did not start"))
        }
        sleep(seconds: 0.05)
        let after = residentBytes()
        raw_peer_loops_stop(loops)
        return .success(Double(after - before) / Double(count))
    }
}

/// An idle loop of a C peer.
private final class PeerIdle: IdleProbe, @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    init(handle: UnsafeMutableRawPointer) { self.handle = handle }
    var wakeUps: Int { Int(raw_peer_idle_wakeups(handle)) }
    func stop() -> Bool { raw_peer_idle_stop(handle) != 0 }
}
