import CRawPeer
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

/// The workloads on RunLoopKit, through its public API only.
enum RunLoopKitContender: Contender {
    /// Stops `threads` (`LoopThread.stop()` joins), giving up after `timeout` seconds so that a
    /// loop that cannot stop fails the figure instead of hanging the benchmark.
    @discardableResult
    static func stop(_ threads: [LoopThread], timeout: Double = 10) -> Bool {
        let stopped: Void? = onFreshThread(timeout: timeout) { () -> Void in
            for thread in threads { thread.stop() }
        }
        return stopped != nil
    }

    // MARK: 1. Post throughput

    static func postThroughput(
        producers: Int, blocks: Int, capture: PostCapture, pinnedTo processors: PostProcessors?, timeout: Double
    ) -> Outcome<Double> {
        let thread = LoopThread(name: "bench-post")
        // In this order: the loop thread is stopped before the global goes.
        defer { PostCounter.current = nil }
        defer { stop([thread]) }
        let loop = thread.loop
        if let processors, !pinLoopThread(to: processors.loop, with: { loop.perform($0) }) {
            return .failure(BenchError(reason: "could not pin the loop thread"))
        }
        let counter = PostCounter(target: blocks)
        PostCounter.current = Unmanaged.passUnretained(counter)
        return measureProducers(producers, total: blocks, counter: counter, pinnedTo: processors, timeout: timeout) {
            index, share in
            switch capture {
            case .sharedObject:
                // The closure's context is the counter itself: one retain per post.
                for _ in 0..<share { loop.perform { counter.ran() } }
            case .nothing:
                for _ in 0..<share { loop.perform { PostCounter.ranCurrent() } }
            case .typical, .typicalUnretained:
                postTypical(share, producer: index, counter: counter, retained: capture == .typical) {
                    loop.perform($0)
                }
            }
        }
    }

    // MARK: 2. Ping-pong

    private final class PingPongState: @unchecked Sendable {
        let a: Loop
        let b: Loop
        let roundTrips: Int
        var times: [Double] = []  // loop A only
        var start = 0.0  // loop A only
        var cancelled = false  // loop A only
        let done = DispatchSemaphore(value: 0)

        init(a: Loop, b: Loop, roundTrips: Int) {
            self.a = a
            self.b = b
            self.roundTrips = roundTrips
            times.reserveCapacity(roundTrips)
        }

        /// On loop A: starts a round trip.
        func ping() {
            start = monotonicSeconds()
            b.perform { self.a.perform { self.back() } }
        }

        /// On loop A: a round trip ended.
        func back() {
            guard !cancelled else { return }
            times.append((monotonicSeconds() - start) * 1e6)
            if times.count < roundTrips {
                ping()
            } else {
                done.signal()
            }
        }
    }

    static func pingPong(roundTrips: Int, timeout: Double) -> Outcome<[Double]> {
        pingPong(roundTrips: roundTrips, timeout: timeout, spinLimit: nil)
    }

    /// `spinLimit`: set on both loops; nil keeps the default.
    static func pingPong(roundTrips: Int, timeout: Double, spinLimit: Duration?) -> Outcome<[Double]> {
        let threadA = LoopThread(name: "bench-ping")
        let threadB = LoopThread(name: "bench-pong")
        if let spinLimit {
            threadA.loop.spinLimit = spinLimit
            threadB.loop.spinLimit = spinLimit
        }
        let state = PingPongState(a: threadA.loop, b: threadB.loop, roundTrips: roundTrips)
        threadA.loop.perform { state.ping() }
        let finished = state.done.wait(timeout: .now() + timeout) == .success
        let cancelled = DispatchSemaphore(value: 0)
        threadA.loop.perform {
            state.cancelled = true
            cancelled.signal()
        }
        _ = cancelled.wait(timeout: .now() + 10)
        guard stop([threadB, threadA]) else { return .failure(BenchError(reason: "loop threads did not stop")) }
        return finished ? .success(state.times) : .failure(.timedOut)
    }

    // MARK: 3. Timers

    private final class LatenessState: @unchecked Sendable {
        let lateness: UnsafeMutableBufferPointer<Double>
        var fired = 0
        init(count: Int) {
            lateness = .allocate(capacity: count)
            lateness.initialize(repeating: .nan)
        }
        deinit { lateness.deallocate() }
    }

    static func timers(offsets: [Double], lead: Double, timeout: Double) -> Outcome<TimerRun> {
        let spread = offsets.max() ?? 0
        let run = onFreshThread(timeout: lead + spread + timeout + 10) { () -> Outcome<TimerRun> in
            let loop = Loop.current
            let state = LatenessState(count: offsets.count)
            let first = ContinuousClock.now + .seconds(double: lead)
            let dues = offsets.map { first + .seconds(double: $0) }

            let start = monotonicSeconds()
            for index in dues.indices {
                let due = dues[index]
                let timer = LoopTimer(fireAt: due) { _ in
                    state.lateness[index] = (ContinuousClock.now - due).microseconds
                    state.fired += 1
                }
                loop.add(timer, forMode: .default)
            }
            let end = monotonicSeconds()
            let endOffset = (ContinuousClock.now - first).microseconds * 1e-6

            // The mode is finished (the run returns) once the last one-shot timer has fired.
            loop.run(mode: .default, for: .seconds(double: lead + spread + timeout))
            guard state.fired == offsets.count else { return .failure(.timedOut) }
            return .success(
                TimerRun(scheduleSeconds: end - start, scheduleEndOffset: endOffset, lateness: Array(state.lateness)))
        }
        return run ?? .failure(.timedOut)
    }

    // MARK: 4. Timer churn

    static func timerChurn(timers: Int, window: Int) -> Outcome<Double> {
        let seconds = onFreshThread(timeout: 600) { () -> Double in
            let loop = Loop.current
            var ring = [LoopTimer?](repeating: nil, count: window)
            let base = ContinuousClock.now + .seconds(3600)
            let start = monotonicSeconds()
            for index in 0..<timers {
                let timer = LoopTimer(fireAt: base + .microseconds(churnJitterMicroseconds(index))) { _ in }
                loop.add(timer, forMode: .default)
                let slot = index % window
                ring[slot]?.invalidate()
                ring[slot] = timer
            }
            for timer in ring { timer?.invalidate() }
            return monotonicSeconds() - start
        }
        return seconds.map { .success($0) } ?? .failure(.timedOut)
    }

    // MARK: 5. Iteration overhead

    private final class BusyState: @unchecked Sendable {
        var performed = 0
        var observed = 0
        var source: LoopSource?
    }

    static func iteration(seconds: Double, observers: Int) -> Outcome<Double> {
        iteration(seconds: seconds, observers: observers, instrumented: .none)
    }

    /// What watches the busy loop: nothing, `collectsMetrics`, or a `LoopTracer`.
    enum Instrumentation: Sendable {
        case none, metrics, tracer
    }

    static func iteration(seconds: Double, observers: Int, instrumented: Instrumentation) -> Outcome<Double> {
        let rate = onFreshThread(timeout: seconds + 30) { () -> Double in
            let loop = Loop.current
            let tracer = instrumented == .tracer ? LoopTracer(capacity: 65_536) : nil
            if let tracer { loop.attach(tracer) }
            if instrumented == .metrics { loop.collectsMetrics = true }
            defer {
                if let tracer { loop.detach(tracer) }
                loop.collectsMetrics = false
            }
            let state = BusyState()
            let source = LoopSource {
                state.performed += 1
                state.source?.signal()
            }
            state.source = source
            loop.add(source, forMode: .default)
            let watchers = (0..<observers).map { _ in
                LoopObserver(activities: .allActivities) { _, _ in state.observed += 1 }
            }
            for observer in watchers { loop.add(observer, forMode: .default) }
            source.signal()
            let start = monotonicSeconds()
            loop.run(mode: .default, for: .seconds(double: seconds))
            let elapsed = monotonicSeconds() - start
            for observer in watchers { observer.invalidate() }
            source.invalidate()
            state.source = nil
            return Double(state.performed) / elapsed
        }
        return rate.map { .success($0) } ?? .failure(.timedOut)
    }

    // MARK: 6. Descriptor ping-pong

    private final class DescriptorState: @unchecked Sendable {
        let roundTrips: Int
        var completed = 0  // loop A only
        var end = 0.0
        let done = DispatchSemaphore(value: 0)
        init(roundTrips: Int) { self.roundTrips = roundTrips }
    }

    static func descriptorPingPong(roundTrips: Int, timeout: Double) -> Outcome<Double> {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0 else {
            return .failure(BenchError(reason: "socketpair failed"))
        }
        defer {
            close(fds[0])
            close(fds[1])
        }
        let state = DescriptorState(roundTrips: roundTrips)
        let threadA = LoopThread(name: "bench-fd-a")
        let threadB = LoopThread(name: "bench-fd-b")
        let endA = fds[0]
        let endB = fds[1]
        let sourceA: LoopDescriptorSource
        let sourceB: LoopDescriptorSource
        do {
            sourceA = try LoopDescriptorSource(fileDescriptor: endA, events: .readable) { _, _ in
                var byte: UInt8 = 0
                guard read(endA, &byte, 1) == 1 else { return }
                state.completed += 1
                if state.completed < state.roundTrips {
                    _ = write(endA, &byte, 1)
                } else {
                    state.end = monotonicSeconds()
                    state.done.signal()
                }
            }
            sourceB = try LoopDescriptorSource(fileDescriptor: endB, events: .readable) { _, _ in
                var byte: UInt8 = 0
                guard read(endB, &byte, 1) == 1 else { return }
                _ = write(endB, &byte, 1)
            }
        } catch {
            stop([threadA, threadB])
            return .failure(BenchError(reason: "LoopDescriptorSource: \(error)"))
        }
        threadA.loop.add(sourceA, forMode: .default)
        threadB.loop.add(sourceB, forMode: .default)
        // Both loops have taken their source once they have run a block posted after the add.
        for thread in [threadA, threadB] {
            let seen = DispatchSemaphore(value: 0)
            thread.loop.perform { seen.signal() }
            _ = seen.wait(timeout: .now() + 5)
        }
        let start = monotonicSeconds()
        var byte: UInt8 = 120
        _ = write(endA, &byte, 1)
        let finished = state.done.wait(timeout: .now() + timeout) == .success
        // Off epoll on each loop's own thread before the descriptors are closed.
        for (thread, source) in [(threadA, sourceA), (threadB, sourceB)] {
            let removed = DispatchSemaphore(value: 0)
            thread.loop.perform {
                source.invalidate()
                removed.signal()
            }
            _ = removed.wait(timeout: .now() + 5)
        }
        guard stop([threadA, threadB]) else { return .failure(BenchError(reason: "loop threads did not stop")) }
        guard finished else { return .failure(.timedOut) }
        return .success(Double(roundTrips) / (state.end - start))
    }

    // MARK: 7. Idle

    private final class Idle: IdleProbe, @unchecked Sendable {
        let count = Atomic<Int>(0)
        let stopRequested = Atomic<Bool>(false)
        var loop: Loop?
        var thread: NativeThread?

        var wakeUps: Int { count.load(ordering: .relaxed) }

        func stop() -> Bool {
            stopRequested.store(true, ordering: .releasing)
            guard let loop, let thread else { return false }
            for _ in 0..<500 {
                loop.stop()
                if thread.wait(timeout: 0.01) { return thread.join(timeout: 1) }
            }
            return thread.join(timeout: 0)
        }
    }

    static func startIdle(withTimer: Bool) -> Outcome<any IdleProbe> {
        let idle = Idle()
        let ready = DispatchSemaphore(value: 0)
        let thread = NativeThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            let observer = LoopObserver(activities: .afterWaiting) { _, _ in
                idle.count.add(1, ordering: .relaxed)
            }
            loop.add(observer, forMode: .default)
            let tick = withTimer ? LoopTimer(after: .milliseconds(500), repeating: .seconds(1)) { _ in } : nil
            if let tick { loop.add(tick, forMode: .default) }
            idle.loop = loop
            ready.signal()
            while !idle.stopRequested.load(ordering: .acquiring) {
                loop.run(mode: .default, for: .seconds(3600))
            }
            tick?.invalidate()
            observer.invalidate()
            keepAlive.invalidate()
        }
        idle.thread = thread
        guard ready.wait(timeout: .now() + 10) == .success else { return .failure(.timedOut) }
        return .success(idle)
    }

    // MARK: 8. Memory

    static func memoryPerTimer(count: Int) -> Outcome<Double> {
        let bytes = onFreshThread(timeout: 600) { () -> Double in
            let loop = Loop.current
            let base = ContinuousClock.now + .seconds(3600)
            // Warm up the loop's tables, then measure from a trimmed heap.
            for index in 0..<1_000 {
                let timer = LoopTimer(fireAt: base + .microseconds(index)) { _ in }
                loop.add(timer, forMode: .default)
                timer.invalidate()
            }
            var timers: [LoopTimer] = []
            timers.reserveCapacity(count)
            raw_malloc_trim()
            let before = residentBytes()
            for index in 0..<count {
                let timer = LoopTimer(fireAt: base + .microseconds(churnJitterMicroseconds(index))) { _ in }
                loop.add(timer, forMode: .default)
                timers.append(timer)
            }
            let after = residentBytes()
            for timer in timers { timer.invalidate() }
            return Double(after - before) / Double(count)
        }
        return bytes.map { .success($0) } ?? .failure(.timedOut)
    }

    static func memoryPerLoop(count: Int) -> Outcome<Double> {
        // The first loops fault in the library's code pages: not the cost of one more loop.
        guard case .success = startedLoops(memoryWarmUpLoops, measuring: false) else {
            return .failure(BenchError(reason: "warm-up loops did not stop"))
        }
        return startedLoops(count, measuring: true)
    }

    /// Starts `count` loop threads, lets each run once and go back to sleep, then stops them; when
    /// `measuring`, the resident bytes they added, per loop.
    private static func startedLoops(_ count: Int, measuring: Bool) -> Outcome<Double> {
        raw_malloc_trim()
        let before = residentBytes()
        let threads = (0..<count).map { LoopThread(name: "bench-mem-\($0)") }
        // Every loop has run (its event base exists) and is asleep again.
        let group = DispatchGroup()
        for thread in threads {
            group.enter()
            thread.loop.perform { group.leave() }
        }
        let settled = group.wait(timeout: .now() + 30) == .success
        if measuring { sleep(seconds: 0.05) }
        let after = residentBytes()
        guard stop(threads, timeout: 60) else { return .failure(BenchError(reason: "loop threads did not stop")) }
        guard settled else { return .failure(.timedOut) }
        return .success(Double(after - before) / Double(count))
    }
}
