import RunLoopKit
import Synchronization

// The workloads (the Swift concurrency ones are in ConcurrencyWorkloads.swift). Each implementation (a `Contender`) does every workload the same way in
// spirit; the per-implementation files say how exactly.

/// One timers run: the cost of scheduling, and how late each timer fired.
struct TimerRun: Sendable {
    /// Seconds spent creating and adding all timers.
    var scheduleSeconds: Double
    /// End of scheduling minus the earliest due time: negative when every timer was scheduled in
    /// time, so that lateness measures the firing machinery alone.
    var scheduleEndOffset: Double
    /// Lateness of each timer in microseconds.
    var lateness: [Double]
}

/// An idle loop being watched: how many times it has woken up so far.
protocol IdleProbe: AnyObject, Sendable {
    var wakeUps: Int { get }
    /// Stops the loop and its thread; false if the thread did not exit in time.
    func stop() -> Bool
}

/// One implementation of every workload.
protocol Contender {
    /// `blocks` in total from `producers` threads, each block capturing what `capture` says;
    /// blocks per second.
    /// `processors`: where the loop thread and the producers are pinned; nil for the scheduler's
    /// choice.
    static func postThroughput(
        producers: Int, blocks: Int, capture: PostCapture, pinnedTo processors: PostProcessors?, timeout: Double
    ) -> Outcome<Double>
    /// Round-trip times in microseconds.
    static func pingPong(roundTrips: Int, timeout: Double) -> Outcome<[Double]>
    /// One-shot timers due `lead + offsets[i]` seconds from now.
    static func timers(offsets: [Double], lead: Double, timeout: Double) -> Outcome<TimerRun>
    /// Seconds to schedule `timers` timers and invalidate each `window` timers later.
    static func timerChurn(timers: Int, window: Int) -> Outcome<Double>
    /// Seconds to schedule `blocks` cancellable one-shot blocks from the loop's thread and cancel
    /// each at once; with `fireHalf`, each due now, every other one cancelled, then the loop runs
    /// until the others ran (`ScheduleWorkload.swift`).
    static func scheduleCancel(blocks: Int, fireHalf: Bool) -> Outcome<Double>
    /// Seconds to add `removalOrder.count` items of one kind to a loop of the calling thread, then
    /// remove them all, item `removalOrder[0]` first (`ScaleWorkload.swift`).
    static func itemsAtScale(_ items: ScaleItems, removalOrder: [Int32]) -> Outcome<Double>
    /// Iterations per second of a loop kept busy by a self-reposting source.
    static func iteration(seconds: Double, observers: Int) -> Outcome<Double>
    /// Round trips per second of one byte over a socketpair between two loops.
    static func descriptorPingPong(roundTrips: Int, timeout: Double) -> Outcome<Double>
    /// An idle loop on its own thread, with no timer or one 1 Hz timer (first fire 0.5 s after start).
    static func startIdle(withTimer: Bool) -> Outcome<any IdleProbe>
    /// Resident bytes per scheduled timer.
    static func memoryPerTimer(count: Int) -> Outcome<Double>
    /// Resident bytes per loop (a thread asleep in its loop).
    static func memoryPerLoop(count: Int) -> Outcome<Double>
}

enum MetricID {
    static let post1 = "post.1"
    static let post4 = "post.4"
    static let post1CaptureFree = "post.1.free"
    static let post4CaptureFree = "post.4.free"
    static let post1Typical = "post.1.typical"
    static let post4Typical = "post.4.typical"
    static let pingPongP50 = "pingpong.p50"
    static let pingPongP99 = "pingpong.p99"
    static let pingPongCPU = "pingpong.cpu"
    static let pingPongNoSpinP50 = "pingpong.nospin.p50"
    static let pingPongNoSpinCPU = "pingpong.nospin.cpu"
    static let timerSchedule = "timers.schedule"
    static let timerP50 = "timers.p50"
    static let timerP99 = "timers.p99"
    static let timerMax = "timers.max"
    static let timerAllFired = "timers.all"
    static let churn = "churn"
    static let iteration0 = "iteration.0"
    static let iteration6 = "iteration.6"
    static let iterationMetrics = "iteration.metrics"
    static let iterationTracer = "iteration.tracer"
    static let descriptor = "descriptor"
    static let idleNone = "idle.none"
    static let idle1Hz = "idle.1hz"
    static let memoryTimer = "memory.timer"
    static let memoryLoop = "memory.loop"
    static let pingPongCurve = "pingpong-latency"
    static let timerCurve = "timer-lateness"
    static let actorHopLoop = "actorhop.loop"
    static let actorHopDefault = "actorhop.default"
    static let actorHopLoopP50 = "actorhop.loop.p50"
    static let actorHopDefaultP50 = "actorhop.default.p50"
    static let jobsLoop = "jobs.loop"
    static let jobsDefault = "jobs.default"
}

/// Leads (seconds from now to the first due time) that let each implementation finish scheduling
/// before its first timer is due; learnt from the runs so far.
private let timerLeads = Locked<[Implementation: Double]>([:])

enum Workloads {
    static let all: [Workload] = [
        post, pingPong, timers, churn, iteration, descriptor, idle, memory, actorHop, jobs, bulk, echo, connections,
        schedule, scale, port, datagrams, fileWatch,
    ]

    static let post = Workload(
        number: 1, name: "post", title: "Cross-thread post throughput",
        metrics: [
            Metric(id: MetricID.post1, label: "post, 1 producer", unit: "blocks/s", direction: .higherIsBetter),
            Metric(id: MetricID.post4, label: "post, 4 producers", unit: "blocks/s", direction: .higherIsBetter),
            Metric(
                id: MetricID.post1CaptureFree, label: "post, 1 producer, capture-free", unit: "blocks/s",
                direction: .higherIsBetter),
            Metric(
                id: MetricID.post4CaptureFree, label: "post, 4 producers, capture-free", unit: "blocks/s",
                direction: .higherIsBetter),
            Metric(
                id: MetricID.post1Typical, label: "post, 1 producer, typical closure", unit: "blocks/s",
                direction: .higherIsBetter),
            Metric(
                id: MetricID.post4Typical, label: "post, 4 producers, typical closure", unit: "blocks/s",
                direction: .higherIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "`loop.perform { counter.ran() }` from producer threads to a `LoopThread`: each block captures the run's one counter object (its reference count changes with every post and every run block); capture-free rows: `loop.perform { PostCounter.ranCurrent() }`, which reaches the counter through a global; typical-closure rows: the block captures the counter, the producer's tally object and three integers, adds to the tally and counts (its context is allocated with each post and freed on the loop thread)",
            .foundation:
                "`CFRunLoopPerformBlock` + `CFRunLoopWakeUp` from producer threads to a thread in `CFRunLoopRunInMode`, the same closures",
            .libevent:
                "mutex-protected queue of (function, context) items + one eventfd write per batch; no reference counts, so the capture-free rows run the same workload again; typical-closure rows: the context is a malloc'd item with the same values, freed on the loop thread",
            .libuv:
                "a `uv_async_t` + a mutex-protected list of malloc'd items (each freed on the loop thread after it ran); typical-closure rows: the values in the same item",
            .glib:
                "`g_main_context_invoke` from producer threads to a thread owning the `GMainContext` (an idle `GSource` per block); typical-closure rows: a `g_memdup2` copy of the values as its data, freed on the loop thread",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let runs: [(Int, PostCapture, String)] = [
                (1, .sharedObject, MetricID.post1), (4, .sharedObject, MetricID.post4),
                (1, .nothing, MetricID.post1CaptureFree), (4, .nothing, MetricID.post4CaptureFree),
                (1, .typical, MetricID.post1Typical), (4, .typical, MetricID.post4Typical),
            ]
            // Resolved once: a placement this machine cannot give fails every figure with its reason.
            let processors = size.postPlacement.processors()
            for (producers, capture, id) in runs {
                sample.record(
                    id,
                    processors.flatMap { processors in
                        implementation.contender.postThroughput(
                            producers: producers, blocks: size.postBlocks, capture: capture, pinnedTo: processors,
                            timeout: size.timeout)
                    })
            }
            return sample
        })

    static let pingPong = Workload(
        number: 2, name: "pingpong", title: "Ping-pong latency between two loop threads",
        metrics: [
            Metric(id: MetricID.pingPongP50, label: "ping-pong p50", unit: "µs", direction: .lowerIsBetter),
            Metric(id: MetricID.pingPongP99, label: "ping-pong p99", unit: "µs", direction: .lowerIsBetter),
            Metric(
                id: MetricID.pingPongCPU, label: "ping-pong CPU per round trip", unit: "µs",
                direction: .lowerIsBetter),
            Metric(
                id: MetricID.pingPongNoSpinP50, label: "ping-pong p50, spinLimit 0", unit: "µs",
                direction: .lowerIsBetter),
            Metric(
                id: MetricID.pingPongNoSpinCPU, label: "ping-pong CPU, spinLimit 0", unit: "µs",
                direction: .lowerIsBetter),
        ], curves: [(MetricID.pingPongCurve, "Ping-pong round trip between two loop threads")],
        how: [
            .runLoopKit:
                "a block on loop A posts to loop B, whose block posts back to A (`perform`); the last two rows turn spinning before sleeping off (`spinLimit = .zero`)",
            .foundation: "the same with `CFRunLoopPerformBlock` + `CFRunLoopWakeUp`",
            .libevent: "the same with the C queue + eventfd of each loop",
            .libuv: "the same with the `uv_async_t` + queue of each loop",
            .glib: "the same with `g_main_context_invoke`",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            // CPU time of the whole process (both loop threads; the measuring thread waits on a
            // semaphore) per round trip: what any spinning costs is counted here.
            func measure(
                _ run: () -> Outcome<[Double]>, p50: String, p99: String?, cpu: String, curve: String?
            ) {
                let cpuStart = processCPUSeconds()
                let outcome = run()
                let cpuSeconds = processCPUSeconds() - cpuStart
                switch outcome {
                case .success(let times):
                    let summary = Stats.summary(times)
                    sample.values[p50] = summary.p50
                    if let p99 { sample.values[p99] = summary.p99 }
                    sample.values[cpu] = cpuSeconds * 1e6 / Double(max(1, times.count))
                    if let curve { sample.curves[curve] = Stats.curve(times) }
                case .failure(let error):
                    sample.markMissing([p50, cpu] + (p99.map { [$0] } ?? []), error)
                }
            }
            measure(
                { implementation.contender.pingPong(roundTrips: size.pingPongRoundTrips, timeout: size.timeout) },
                p50: MetricID.pingPongP50, p99: MetricID.pingPongP99, cpu: MetricID.pingPongCPU,
                curve: MetricID.pingPongCurve)
            if implementation == .runLoopKit {
                measure(
                    {
                        RunLoopKitContender.pingPong(
                            roundTrips: size.pingPongRoundTrips, timeout: size.timeout, spinLimit: .zero)
                    }, p50: MetricID.pingPongNoSpinP50, p99: nil, cpu: MetricID.pingPongNoSpinCPU, curve: nil)
            } else {
                sample.markMissing(
                    [MetricID.pingPongNoSpinP50, MetricID.pingPongNoSpinCPU],
                    BenchError(reason: "RunLoopKit's spinLimit; no equivalent"))
            }
            return sample
        })

    static let timers = Workload(
        number: 3, name: "timers", title: "Timers: scheduling cost and lateness",
        metrics: [
            Metric(id: MetricID.timerSchedule, label: "timer schedule", unit: "µs/timer", direction: .lowerIsBetter),
            Metric(id: MetricID.timerP50, label: "timer lateness p50", unit: "µs", direction: .lowerIsBetter),
            Metric(id: MetricID.timerP99, label: "timer lateness p99", unit: "µs", direction: .lowerIsBetter),
            Metric(id: MetricID.timerMax, label: "timer lateness max", unit: "µs", direction: .lowerIsBetter),
            Metric(
                id: MetricID.timerAllFired, label: "timers, first schedule to all fired", unit: "s",
                direction: .lowerIsBetter),
        ].map { metric in
            var metric = metric
            // Where the rounding shows: the typical lateness, and when the last timer fired.
            if [MetricID.timerP50, MetricID.timerAllFired].contains(metric.id) { metric.notes = millisecondTimers }
            return metric
        }, curves: [(MetricID.timerCurve, "Lateness of one-shot timers")],
        how: [
            .runLoopKit: "`LoopTimer(fireAt:)` + `loop.add(_:forMode:)` on the loop's thread, tolerance 0, then `run`",
            .foundation:
                "`CFRunLoopTimerCreateWithHandler` + `CFRunLoopAddTimer`, tolerance 0, then `CFRunLoopRunInMode`",
            .libevent:
                "`event_new` + `event_add` (evtimer) on a base with `EVENT_BASE_FLAG_PRECISE_TIMER | EVENT_BASE_FLAG_NOLOCK`",
            .libuv:
                "`uv_timer_init` + `uv_timer_start` (timeout in ms from `uv_now`), closed when fired, then `uv_run`",
            .glib:
                "`g_timeout_source_new` + `g_source_attach` on the thread's own `GMainContext`, then `g_main_context_iteration`",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let ids = [MetricID.timerSchedule, MetricID.timerP50, MetricID.timerP99, MetricID.timerMax]
            sample.record(MetricID.timerAllFired, allFired(implementation, size))
            switch timersRun(implementation, size) {
            case .success(let run):
                let summary = Stats.summary(run.lateness)
                sample.values[MetricID.timerSchedule] = run.scheduleSeconds * 1e6 / Double(size.timerCount)
                sample.values[MetricID.timerP50] = summary.p50
                sample.values[MetricID.timerP99] = summary.p99
                sample.values[MetricID.timerMax] = summary.max
                sample.curves[MetricID.timerCurve] = Stats.curve(run.lateness)
            case .failure(let error):
                sample.markMissing(ids, error)
            }
            return sample
        })

    /// A timers run whose scheduling ends before the first timer is due; a run that overran its
    /// lead is repeated once with a lead fitted to the scheduling time it took.
    static func timersRun(_ implementation: Implementation, _ size: BenchmarkSize) -> Outcome<TimerRun> {
        let offsets = timerOffsets(count: size.timerCount, spread: size.timerSpread)
        let initial = 0.05 + Double(size.timerCount) * 2e-6
        var lead = timerLeads.withLock { $0[implementation] } ?? initial
        for _ in 0..<2 {
            let outcome = implementation.contender.timers(offsets: offsets, lead: lead, timeout: size.timeout)
            guard case .success(let run) = outcome else { return outcome }
            let fitted = max(initial, run.scheduleSeconds * 1.5 + 0.05)
            timerLeads.withLock { $0[implementation] = fitted }
            if run.scheduleEndOffset < -0.002 { return outcome }
            lead = fitted
        }
        return .failure(BenchError(reason: "scheduling took longer than the lead twice"))
    }

    /// The timers of the timers workload with no lead: each due its offset after scheduling
    /// began. Seconds from the first schedule until the last one fired.
    static func allFired(_ implementation: Implementation, _ size: BenchmarkSize) -> Outcome<Double> {
        let offsets = timerOffsets(count: size.timerCount, spread: size.timerSpread)
        return implementation.contender.timers(offsets: offsets, lead: 0, timeout: size.timeout).map { run in
            zip(offsets, run.lateness).map { $0 + $1 * 1e-6 }.max() ?? 0
        }
    }

    /// libuv's and GLib's timeouts are whole milliseconds.
    static let millisecondTimers: [Implementation: String] = [
        .libuv:
            "timeouts are whole milliseconds from the loop's cached time: each is rounded up to the next, so lateness includes up to 1 ms of rounding",
        .glib:
            "timeouts are whole milliseconds (rounded up, as for libuv), and the loop polls with millisecond timeouts",
    ]

    static let churn = Workload(
        number: 4, name: "churn", title: "Timer churn: schedule and invalidate",
        metrics: [
            Metric(id: MetricID.churn, label: "timer churn", unit: "timers/s", direction: .higherIsBetter)
        ], curves: [],
        how: [
            .runLoopKit: "`LoopTimer` + `add`, `invalidate()` 1,000 timers later (1,000 pending)",
            .foundation:
                "`CFRunLoopTimerCreateWithHandler` + `CFRunLoopAddTimer`, `CFRunLoopTimerInvalidate` 1,000 timers later",
            .libevent: "`event_new` + `event_add`, `event_free` 1,000 timers later",
            .libuv:
                "malloc'd `uv_timer_t`: `uv_timer_init` + `uv_timer_start`, `uv_close` 1,000 timers later (freed by its close callback; `uv_run(UV_RUN_NOWAIT)` every 1,000 timers runs them)",
            .glib:
                "`g_timeout_source_new` + `g_source_attach`, `g_source_destroy` + `g_source_unref` 1,000 timers later",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            sample.record(
                MetricID.churn,
                implementation.contender.timerChurn(timers: size.churnTimers, window: size.churnWindow).map {
                    Double(size.churnTimers) / $0
                })
            return sample
        })

    static let iteration = Workload(
        number: 5, name: "iteration", title: "Iteration overhead of a busy loop",
        metrics: [
            Metric(
                id: MetricID.iteration0, label: "iterations, no observers", unit: "iter/s", direction: .higherIsBetter),
            Metric(
                id: MetricID.iteration6, label: "iterations, 6 observers", unit: "iter/s", direction: .higherIsBetter,
                notes: [
                    .libevent:
                        "libevent 2.1 has no observers (evwatch is 2.2): its loop calls six function pointers at the same two points of each pass",
                    .libuv: "six `uv_prepare_t` (before polling) and six `uv_check_t` (after polling) handles",
                    .glib:
                        "GLib has no observers: six custom `GSource`s whose prepare and check functions run before and after polling",
                ]),
            Metric(
                id: MetricID.iterationMetrics, label: "iterations, metrics on", unit: "iter/s",
                direction: .higherIsBetter),
            Metric(
                id: MetricID.iterationTracer, label: "iterations, tracer on", unit: "iter/s",
                direction: .higherIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "a `LoopSource` that signals itself from its handler; observers watch all activities; the last two rows turn `collectsMetrics` on or attach a `LoopTracer` (no observers)",
            .foundation:
                "a version-0 `CFRunLoopSource` that signals itself; `CFRunLoopObserverCreateWithHandler` on all activities",
            .libevent:
                "an event that re-activates itself (`event_active`) and ends the pass; a C driver loop calls six function pointers before timers and before sources (libevent 2.1 has no observers), then `event_base_loop(EVLOOP_NONBLOCK)`",
            .libuv:
                "a `uv_idle_t` (the loop polls without blocking while it is active) and a `uv_async_t` registered, `uv_run(UV_RUN_DEFAULT)`; observers: `uv_prepare_t` + `uv_check_t`",
            .glib:
                "an idle `GSource` that stays ready, `g_main_context_iteration(context, FALSE)` in a loop; observers: custom `GSource`s (prepare and check)",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            for (observers, id) in [(0, MetricID.iteration0), (6, MetricID.iteration6)] {
                sample.record(
                    id, implementation.contender.iteration(seconds: size.iterationSeconds, observers: observers))
            }
            // RunLoopKit's instruments (no observers): `collectsMetrics`, and a `LoopTracer` attached.
            let instrumented = [
                (RunLoopKitContender.Instrumentation.metrics, MetricID.iterationMetrics),
                (.tracer, MetricID.iterationTracer),
            ]
            for (instrumentation, id) in instrumented {
                guard implementation == .runLoopKit else {
                    sample.markMissing([id], BenchError(reason: "RunLoopKit's instruments; no equivalent measured"))
                    continue
                }
                sample.record(
                    id,
                    RunLoopKitContender.iteration(
                        seconds: size.iterationSeconds, observers: 0, instrumented: instrumentation))
            }
            return sample
        })

    static let descriptor = Workload(
        number: 6, name: "descriptor", title: "Descriptor ping-pong over a socketpair",
        metrics: [
            Metric(
                id: MetricID.descriptor, label: "descriptor ping-pong", unit: "round trips/s",
                direction: .higherIsBetter,
                notes: [
                    .foundation:
                        "no descriptor source on Linux's CFRunLoop: measured with CFSocket, whose callbacks come from a helper select() thread"
                ])
        ], curves: [],
        how: [
            .runLoopKit: "a `LoopDescriptorSource` (`.readable`) on each end, on two `LoopThread`s",
            .foundation:
                "`CFSocket` read callbacks (swift-corelibs-foundation serves them from a helper `select()` thread)",
            .libevent: "a persistent `EV_READ` event on each end, on two raw loops",
            .libuv: "a `uv_poll_t` (`UV_READABLE`) on each end, on two loop threads",
            .glib:
                "`g_unix_fd_source_new` (`G_IO_IN`, what `g_unix_fd_add` attaches to the default context) on each end, attached to two loop threads' contexts",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            sample.record(
                MetricID.descriptor,
                implementation.contender.descriptorPingPong(
                    roundTrips: size.descriptorRoundTrips, timeout: size.timeout))
            return sample
        })

    static let idle = Workload(
        number: 7, name: "idle", title: "Idle wake-ups",
        metrics: [
            Metric(id: MetricID.idleNone, label: "idle, no timers", unit: "wake-ups/s", direction: .lowerIsBetter),
            Metric(id: MetricID.idle1Hz, label: "idle, one 1 Hz timer", unit: "wake-ups/s", direction: .lowerIsBetter),
        ], curves: [],
        how: [
            .runLoopKit: "`afterWaiting` observer callouts of a loop kept alive by an unsignalled `LoopSource`",
            .foundation:
                "`afterWaiting` CFRunLoopObserver callouts of a loop kept alive by an unsignalled version-0 source",
            .libevent: "`event_base_loop(EVLOOP_ONCE)` returns of a base with only its wake-up eventfd registered",
            .libuv: "`uv_run(UV_RUN_ONCE)` returns of a loop with only its `uv_async_t` (and the timer)",
            .glib:
                "`g_main_context_iteration(context, TRUE)` returns of a context with only its own wake-up (and the timer)",
        ],
        runner: .together { size in
            // Ten idle loops (five implementations, with and without the timer) share one window.
            var probes: [(Implementation, String, Outcome<any IdleProbe>)] = []
            for implementation in Implementation.allCases {
                probes.append((implementation, MetricID.idleNone, implementation.contender.startIdle(withTimer: false)))
                probes.append((implementation, MetricID.idle1Hz, implementation.contender.startIdle(withTimer: true)))
            }
            sleep(seconds: 0.02)  // let the set-up wake-ups pass
            let before = probes.map { (try? $0.2.get())?.wakeUps ?? 0 }
            let start = monotonicSeconds()
            sleep(seconds: size.idleSeconds)
            let after = probes.map { (try? $0.2.get())?.wakeUps ?? 0 }
            let elapsed = monotonicSeconds() - start
            var samples: [Implementation: Sample] = [:]
            for (index, (implementation, id, probe)) in probes.enumerated() {
                switch probe {
                case .success(let probe):
                    if probe.stop() {
                        samples[implementation, default: Sample()].values[id] =
                            Double(after[index] - before[index]) / elapsed
                    } else {
                        samples[implementation, default: Sample()].missing[id] = "loop did not stop"
                    }
                case .failure(let error):
                    samples[implementation, default: Sample()].missing[id] = error.reason
                }
            }
            return samples
        })

    static let memory = Workload(
        number: 8, name: "memory", title: "Memory per timer and per loop",
        metrics: [
            Metric(id: MetricID.memoryTimer, label: "memory per timer", unit: "bytes", direction: .lowerIsBetter),
            Metric(id: MetricID.memoryLoop, label: "memory per loop", unit: "bytes", direction: .lowerIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "RSS delta (in a fresh child process) over pending `LoopTimer`s in one loop, and over `LoopThread`s asleep in their loops",
            .foundation:
                "RSS delta over pending `CFRunLoopTimer`s in one run loop, and over threads asleep in `CFRunLoopRunInMode`",
            .libevent: "RSS delta over pending evtimers on one base, and over threads asleep in `event_base_loop`",
            .libuv: "RSS delta over pending malloc'd `uv_timer_t`s on one loop, and over threads asleep in `uv_run`",
            .glib:
                "RSS delta over pending timeout sources on one context, and over threads asleep in `g_main_context_iteration`",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            sample.record(
                MetricID.memoryTimer,
                MemoryProbe.measure(implementation, .timer, count: size.memoryTimers, timeout: size.timeout))
            sample.record(
                MetricID.memoryLoop,
                MemoryProbe.measure(implementation, .loop, count: size.memoryLoops, timeout: size.timeout))
            return sample
        })
}
