import Dispatch
import RunLoopKit
import Synchronization

// Swift concurrency on a loop: a `Loop` as an actor's executor and as a task executor, against
// Swift's default executors. Neither Foundation's RunLoop nor libevent is an executor, so these
// figures are RunLoopKit's own, each paired with the default executor doing the same thing.

/// An actor with one trivial method; the workloads call it from a task.
protocol HopTarget: Actor {
    func hop() -> Int
}

/// An actor isolated to a loop: its methods run on the loop's thread.
actor LoopIsolatedCounter: HopTarget {
    let loop: Loop
    private var count = 0
    init(loop: Loop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    func hop() -> Int {
        count += 1
        return count
    }
}

/// The same actor on Swift's default actor executor.
actor PlainCounter: HopTarget {
    private var count = 0
    func hop() -> Int {
        count += 1
        return count
    }
}

enum ConcurrencyContender {
    /// Why the other implementations have no figure.
    static let notAnExecutor = BenchError(
        reason: "not a Swift concurrency executor; the default-executor rows are the comparison")

    /// From a detached task (global concurrent executor), `await actor.hop()` `roundTrips` times
    /// after a short warm-up; the time of each round trip in microseconds.
    static func actorHops<A: HopTarget>(_ actor: A, roundTrips: Int, timeout: Double) -> Outcome<[Double]> {
        let result = Box<[Double]>([])
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            for _ in 0..<min(100, roundTrips) { _ = await actor.hop() }
            var times: [Double] = []
            times.reserveCapacity(roundTrips)
            for _ in 0..<roundTrips {
                let start = monotonicSeconds()
                _ = await actor.hop()
                times.append((monotonicSeconds() - start) * 1e6)
            }
            result.value = times
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else { return .failure(.timedOut) }
        return .success(result.value)
    }

    /// Counts finished jobs; the one that finishes the last records the end time.
    private final class JobState: @unchecked Sendable {
        let target: Int
        let count = Atomic(0)
        var end = 0.0  // written once, before `done` is signalled
        let done = DispatchSemaphore(value: 0)
        init(target: Int) { self.target = target }

        func ran() {
            if count.add(1, ordering: .relaxed).newValue == target {
                end = monotonicSeconds()
                done.signal()
            }
        }
    }

    /// `jobs` tasks created from the measuring thread, each incrementing a counter; jobs per
    /// second from the first creation to the last job's end. `loop` nil: the default executor.
    static func jobThroughput(on loop: Loop?, jobs: Int, timeout: Double) -> Outcome<Double> {
        let state = JobState(target: jobs)
        let start = monotonicSeconds()
        if let loop {
            for _ in 0..<jobs { Task(executorPreference: loop) { state.ran() } }
        } else {
            for _ in 0..<jobs { Task.detached { state.ran() } }
        }
        guard state.done.wait(timeout: .now() + timeout) == .success else { return .failure(.timedOut) }
        return .success(Double(jobs) / (state.end - start))
    }

    /// Actor hops on a loop-isolated actor, then on a plain one.
    static func actorHopSample(_ implementation: Implementation, _ size: BenchmarkSize) -> Sample {
        var sample = Sample()
        let ids = [
            (MetricID.actorHopLoop, MetricID.actorHopLoopP50), (MetricID.actorHopDefault, MetricID.actorHopDefaultP50),
        ]
        guard implementation == .runLoopKit else {
            sample.markMissing(ids.flatMap { [$0.0, $0.1] }, notAnExecutor)
            return sample
        }
        let thread = LoopThread(name: "bench-actor")
        defer { RunLoopKitContender.stop([thread]) }
        let outcomes = [
            actorHops(
                LoopIsolatedCounter(loop: thread.loop), roundTrips: size.actorRoundTrips, timeout: size.timeout),
            actorHops(PlainCounter(), roundTrips: size.actorRoundTrips, timeout: size.timeout),
        ]
        for ((rate, p50), outcome) in zip(ids, outcomes) {
            switch outcome {
            case .success(let times):
                sample.values[rate] = Double(times.count) / (times.reduce(0, +) * 1e-6)
                sample.values[p50] = Stats.summary(times).p50
            case .failure(let error):
                sample.markMissing([rate, p50], error)
            }
        }
        return sample
    }

    /// Job throughput with a loop as the task executor, then with the default executor.
    static func jobSample(_ implementation: Implementation, _ size: BenchmarkSize) -> Sample {
        var sample = Sample()
        guard implementation == .runLoopKit else {
            sample.markMissing([MetricID.jobsLoop, MetricID.jobsDefault], notAnExecutor)
            return sample
        }
        let thread = LoopThread(name: "bench-jobs")
        defer { RunLoopKitContender.stop([thread]) }
        sample.record(
            MetricID.jobsLoop, jobThroughput(on: thread.loop, jobs: size.executorJobs, timeout: size.timeout))
        sample.record(MetricID.jobsDefault, jobThroughput(on: nil, jobs: size.executorJobs, timeout: size.timeout))
        return sample
    }
}

extension Workloads {
    static let actorHop = Workload(
        number: 9, name: "actorhop", title: "Actor-hop round trips (Swift concurrency)",
        metrics: [
            Metric(
                id: MetricID.actorHopLoop, label: "actor hop, loop executor", unit: "round trips/s",
                direction: .higherIsBetter),
            Metric(
                id: MetricID.actorHopDefault, label: "actor hop, default executor", unit: "round trips/s",
                direction: .higherIsBetter),
            Metric(
                id: MetricID.actorHopLoopP50, label: "actor hop p50, loop executor", unit: "µs",
                direction: .lowerIsBetter),
            Metric(
                id: MetricID.actorHopDefaultP50, label: "actor hop p50, default executor", unit: "µs",
                direction: .lowerIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "from a detached task, `await actor.hop()` on an actor whose `unownedExecutor` is a `LoopThread`'s loop, then on the same actor with the default executor"
        ],
        runner: .each { ConcurrencyContender.actorHopSample($0, $1) })

    static let jobs = Workload(
        number: 10, name: "jobs", title: "Job throughput through an executor (Swift concurrency)",
        metrics: [
            Metric(id: MetricID.jobsLoop, label: "jobs, loop executor", unit: "jobs/s", direction: .higherIsBetter),
            Metric(
                id: MetricID.jobsDefault, label: "jobs, default executor", unit: "jobs/s", direction: .higherIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "tasks created from a plain thread with `Task(executorPreference: loop)`, then with `Task.detached` (global concurrent executor); each increments an atomic counter"
        ],
        runner: .each { ConcurrencyContender.jobSample($0, $1) })
}
