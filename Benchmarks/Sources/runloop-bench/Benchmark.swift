import Foundation

// The benchmark's model and runner: implementations, sizes, metrics, samples, and the alternating
// repetitions whose medians make the report.

/// The implementations measured side by side in one process run.
enum Implementation: String, CaseIterable, Sendable, Codable {
    case runLoopKit = "RunLoopKit"
    case foundation = "Foundation"
    case libevent = "libevent"
    case libuv = "libuv"
    case glib = "GLib"

    var contender: any Contender.Type {
        switch self {
        case .runLoopKit: RunLoopKitContender.self
        case .foundation: FoundationContender.self
        case .libevent: LibeventContender.self
        case .libuv: LibuvContender.self
        case .glib: GLibContender.self
        }
    }

    /// The implementations RunLoopKit's figures are divided by.
    static let peers: [Implementation] = [.foundation, .libevent, .libuv, .glib]

    /// The name in a ratio column's heading ("RLK/uv").
    var shortName: String {
        switch self {
        case .runLoopKit: "RLK"
        case .foundation: "Fdn"
        case .libevent: "lev"
        case .libuv: "uv"
        case .glib: "GLib"
        }
    }
}

/// Whether a larger figure is better.
enum Direction: String, Sendable, Codable {
    case higherIsBetter = "higher"
    case lowerIsBetter = "lower"
}

/// One figure of a workload, measured on every implementation.
struct Metric: Sendable {
    let id: String
    let label: String
    let unit: String
    let direction: Direction
    /// Caveats printed under the table, per implementation (e.g. a feature it lacks).
    var notes: [Implementation: String] = [:]
}

/// Why a figure is missing: the implementation cannot do the workload, or it timed out.
struct BenchError: Error, Sendable, Equatable {
    let reason: String
    static let timedOut = BenchError(reason: "timed out")
}

typealias Outcome<T> = Result<T, BenchError>

/// What one run of a workload on one implementation produced.
struct Sample: Sendable {
    /// Metric id to figure.
    var values: [String: Double] = [:]
    /// Metric id to the reason it is missing.
    var missing: [String: String] = [:]
    /// Distribution id to a latency curve: values at `Stats.curveQuantiles`, in microseconds.
    var curves: [String: [Double]] = [:]

    mutating func record(_ id: String, _ outcome: Outcome<Double>) {
        switch outcome {
        case .success(let value): values[id] = value
        case .failure(let error): missing[id] = error.reason
        }
    }

    mutating func markMissing(_ ids: [String], _ error: BenchError) {
        for id in ids { missing[id] = error.reason }
    }
}

/// How big each workload is. `full` is the documented run, `quick` a run under 30 s, `tiny` the
/// smoke test's.
struct BenchmarkSize: Sendable {
    var name: String
    var repetitions: Int
    var postBlocks: Int
    var pingPongRoundTrips: Int
    var timerCount: Int
    var timerSpread: Double
    var churnTimers: Int
    var churnWindow: Int
    var iterationSeconds: Double
    var descriptorRoundTrips: Int
    var idleSeconds: Double
    var memoryTimers: Int
    var memoryLoops: Int
    var actorRoundTrips: Int
    var executorJobs: Int
    var scheduledBlocks: Int
    var scaleItems: Int
    /// Where the post workload's threads run (`--placement`); the scheduler's choice by default.
    var postPlacement: PostPlacement = .scheduler
    /// The socket workloads' sizes (SocketWorkloads.swift).
    var sockets: SocketSizes = .full
    /// Upper bound for one measurement; past it the figure is reported as timed out.
    var timeout: Double
    /// Cache-line round trips in the machine probe before each repetition; 0 skips the probe
    /// (for a profiler such as callgrind, which runs threads one at a time and makes a spinning
    /// probe take minutes).
    var coreRoundTrips: Int = 20_000

    static let full = BenchmarkSize(
        name: "full", repetitions: 5, postBlocks: 500_000, pingPongRoundTrips: 20_000, timerCount: 100_000,
        timerSpread: 0.2, churnTimers: 1_000_000, churnWindow: 1_000, iterationSeconds: 0.5,
        descriptorRoundTrips: 20_000, idleSeconds: 2, memoryTimers: 100_000, memoryLoops: 200, actorRoundTrips: 50_000,
        executorJobs: 200_000, scheduledBlocks: 1_000_000, scaleItems: 50_000, timeout: 60)

    static let quick = BenchmarkSize(
        name: "quick", repetitions: 3, postBlocks: 150_000, pingPongRoundTrips: 3_000, timerCount: 20_000,
        timerSpread: 0.2, churnTimers: 100_000, churnWindow: 1_000, iterationSeconds: 0.1,
        descriptorRoundTrips: 3_000, idleSeconds: 1, memoryTimers: 10_000, memoryLoops: 32, actorRoundTrips: 10_000,
        executorJobs: 50_000, scheduledBlocks: 200_000, scaleItems: 50_000, sockets: .quick, timeout: 15)

    static let tiny = BenchmarkSize(
        name: "tiny", repetitions: 1, postBlocks: 2_000, pingPongRoundTrips: 100, timerCount: 1_000,
        timerSpread: 0.02, churnTimers: 5_000, churnWindow: 100, iterationSeconds: 0.02,
        descriptorRoundTrips: 100, idleSeconds: 0.05, memoryTimers: 1_000, memoryLoops: 4, actorRoundTrips: 200,
        executorJobs: 1_000, scheduledBlocks: 2_000, scaleItems: 5_000, sockets: .tiny, timeout: 30)
}

extension BenchmarkSize {
    /// Integer and seconds parameters that `--set KEY=VALUE` may override.
    private static var integers: [String: WritableKeyPath<BenchmarkSize, Int>] {
        [
            "repetitions": \.repetitions, "postBlocks": \.postBlocks, "pingPongRoundTrips": \.pingPongRoundTrips,
            "timerCount": \.timerCount, "churnTimers": \.churnTimers, "churnWindow": \.churnWindow,
            "descriptorRoundTrips": \.descriptorRoundTrips, "memoryTimers": \.memoryTimers,
            "memoryLoops": \.memoryLoops, "actorRoundTrips": \.actorRoundTrips, "executorJobs": \.executorJobs,
            "bulkBytes": \.sockets.bulkBytes, "echoRoundTrips": \.sockets.echoRoundTrips,
            "echoRoundTripsEach": \.sockets.echoRoundTripsEach, "idleConnections": \.sockets.idleConnections,
            "scheduledBlocks": \.scheduledBlocks, "scaleItems": \.scaleItems, "coreRoundTrips": \.coreRoundTrips,
        ]
    }
    private static var seconds: [String: WritableKeyPath<BenchmarkSize, Double>] {
        [
            "timerSpread": \.timerSpread, "iterationSeconds": \.iterationSeconds, "idleSeconds": \.idleSeconds,
            "timeout": \.timeout,
        ]
    }

    static var keys: [String] { (integers.keys.sorted() + seconds.keys.sorted()) }

    /// Sets the parameter `key` from `text`; false if the key is unknown or the value invalid.
    mutating func set(_ key: String, _ text: String) -> Bool {
        // Counts are positive, except the probe's, which 0 turns off.
        if let path = Self.integers[key], let value = Int(text), value > 0 || (value == 0 && key == "coreRoundTrips") {
            self[keyPath: path] = value
            return true
        }
        if let path = Self.seconds[key], let value = Double(text), value >= 0 {
            self[keyPath: path] = value
            return true
        }
        return false
    }

    /// What each workload does at this size, by workload name (and latency curve id).
    var parameters: [String: String] {
        func count(_ value: Int) -> String { Formatting.grouped(value) }
        func milliseconds(_ seconds: Double) -> String { "\(Int((seconds * 1000).rounded())) ms" }
        let timers = "\(count(timerCount)) timers due evenly over \(milliseconds(timerSpread))"
        let pingPong = "\(count(pingPongRoundTrips)) round trips per repetition"
        let placement =
            switch postPlacement {
            case .scheduler: ""
            case .apart: "; loop thread and producers pinned to two processors"
            case .together: "; loop thread and producers pinned to one processor"
            }
        return [
            Workloads.post.name: "\(count(postBlocks)) blocks per repetition and producer count\(placement)",
            Workloads.pingPong.name: pingPong, MetricID.pingPongCurve: pingPong,
            Workloads.timers.name: timers, MetricID.timerCurve: timers,
            Workloads.churn.name: "\(count(churnTimers)) timers, each invalidated \(count(churnWindow)) timers later",
            Workloads.iteration.name: "\(milliseconds(iterationSeconds)) of busy loop per repetition",
            Workloads.descriptor.name: "\(count(descriptorRoundTrips)) round trips per repetition",
            Workloads.idle.name: "\(milliseconds(idleSeconds)) window per repetition",
            Workloads.memory.name: "\(count(memoryTimers)) timers; \(count(memoryLoops)) loops",
            Workloads.actorHop.name: "\(count(actorRoundTrips)) round trips per repetition and executor",
            Workloads.jobs.name: "\(count(executorJobs)) tasks per repetition and executor",
            Workloads.bulk.name:
                "\(count(sockets.bulkBytes >> 20)) MiB in \(sockets.bulkChunk >> 10) KiB writes per repetition",
            Workloads.echo.name:
                "\(sockets.echoMessage)-byte messages: \(count(sockets.echoRoundTrips)) round trips on 1 connection; \(count(sockets.echoRoundTripsEach)) on each of \(sockets.echoConnections)",
            Workloads.connections.name: "\(count(sockets.idleConnections)) idle connections (client and server side)",
            Workloads.schedule.name: "\(count(scheduledBlocks)) blocks per repetition and row",
            Workloads.scale.name: "\(count(scaleItems)) items per repetition and row, removed in one shuffled order",
            Workloads.port.name: "\(count(postBlocks)) messages or blocks per repetition and row\(placement)",
            Workloads.datagrams.name:
                "\(DatagramSizes(sockets).message)-byte datagrams: \(count(DatagramSizes(sockets).echoRoundTrips)) round trips; \(count(DatagramSizes(sockets).floodDatagrams)) sent, \(DatagramSizes(sockets).window) unacknowledged at most",
            Workloads.fileWatch.name:
                "\(count(FileWatchSizes(self).files)) files created in a watched directory per repetition and row",
        ]
    }
}

/// A workload: its figures, how each implementation does it, and how to run it.
struct Workload: Sendable {
    enum Runner: Sendable {
        /// One implementation per call; the runner alternates them.
        case each(@Sendable (Implementation, BenchmarkSize) -> Sample)
        /// All implementations at once (idle loops, which use no CPU and cannot disturb each other).
        case together(@Sendable (BenchmarkSize) -> [Implementation: Sample])
    }

    let number: Int
    let name: String
    let title: String
    let metrics: [Metric]
    /// Distributions drawn as charts: id and title.
    let curves: [(id: String, title: String)]
    let how: [Implementation: String]
    let runner: Runner

    func matches(_ filter: String) -> Bool {
        let filter = filter.lowercased()
        return name.lowercased().contains(filter) || title.lowercased().contains(filter) || "\(number)" == filter
    }
}

// MARK: Results

/// One figure's medians and ratios.
struct MetricResult: Sendable, Codable {
    let id: String
    let workload: Int
    let workloadName: String
    let label: String
    let unit: String
    let better: Direction
    /// Implementation name to median.
    var medians: [String: Double]
    /// Implementation name to every repetition's figure.
    var samples: [String: [Double]]
    /// Implementation name to why the figure is missing.
    var missing: [String: String]
    /// Implementation name to a caveat about how the figure was obtained.
    var notes: [String: String] = [:]
    var ratioFoundation: Double?
    var ratioLibevent: Double?
    var ratioLibuv: Double?
    var ratioGLib: Double?

    func median(_ implementation: Implementation) -> Double? { medians[implementation.rawValue] }

    /// RunLoopKit's median divided by `peer`'s.
    func ratio(to peer: Implementation) -> Double? {
        switch peer {
        case .runLoopKit: Stats.ratio(median(.runLoopKit), median(.runLoopKit))
        case .foundation: ratioFoundation
        case .libevent: ratioLibevent
        case .libuv: ratioLibuv
        case .glib: ratioGLib
        }
    }
}

/// A latency distribution: per implementation, the median over repetitions of each percentile.
struct CurveResult: Sendable, Codable {
    let id: String
    let title: String
    let quantiles: [Double]
    var series: [String: [Double]]
}

struct MachineDescription: Sendable, Codable {
    let cpu: String
    let cores: Int
    let kernel: String
    let swift: String
    let libevent: String
    /// Nil in reports written before libuv and GLib were measured.
    let libuv: String?
    let glib: String?
    let build: String
    /// A cache line's round trip between two processors, measured before every repetition: what
    /// every block capturing an object shared with its posting thread costs at least, and on a
    /// virtual machine far from constant (the hypervisor moves the virtual processors). Nil on one
    /// processor, and in reports written before it was measured.
    let coreRoundTrip: RoundTrip?
    /// The share of the processors' time the hypervisor gave to others during the run (steal time
    /// in `/proc/stat`), in percent: on a virtual machine, what the host's own load took. Nil if
    /// unknown.
    let stolenPercent: Double?

    /// The whole machine's processor time so far (`/proc/stat`, clock ticks): all of it, and the
    /// part stolen by the hypervisor. Nil if unreadable.
    static func processorTime() -> (total: Int, stolen: Int)? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return nil }
        // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already
        // counted in user and nice.
        let fields = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        guard fields.count >= 8 else { return nil }
        return (fields.prefix(8).reduce(0, +), fields[7])
    }

    /// Round-trip samples in nanoseconds.
    struct RoundTrip: Sendable, Codable {
        let median: Double
        let min: Double
        let max: Double
        let samples: Int

        init?(_ samples: [Double]) {
            guard !samples.isEmpty else { return nil }
            median = Stats.median(samples)
            min = samples.min()!
            max = samples.max()!
            self.samples = samples.count
        }

        /// "95 ns median, 63–465 ns in 30 samples".
        var text: String {
            let median = Int(self.median.rounded())
            guard samples > 1 else { return "\(median) ns" }
            return "\(median) ns median, \(Int(min.rounded()))–\(Int(max.rounded())) ns in \(samples) samples"
        }
    }

    /// This machine; `roundTrips`: the cache-line round trips measured during the run (ns).
    /// `since`: `processorTime()` when the run started.
    static func current(roundTrips: [Double] = [], since: (total: Int, stolen: Int)? = nil) -> MachineDescription {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        var name = utsname()
        uname(&name)
        let kernel = withUnsafeBytes(of: &name.release) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return MachineDescription(
            cpu: model, cores: ProcessInfo.processInfo.activeProcessorCount, kernel: kernel,
            swift: swiftVersion, libevent: LibeventContender.version, libuv: LibuvContender.version,
            glib: GLibContender.version, build: buildConfiguration,
            coreRoundTrip: RoundTrip(roundTrips), stolenPercent: stolenPercent(since: since))
    }

    private static func stolenPercent(since start: (total: Int, stolen: Int)?) -> Double? {
        guard let start, let end = processorTime(), end.total > start.total else { return nil }
        return Double(end.stolen - start.stolen) * 100 / Double(end.total - start.total)
    }
}

struct Report: Sendable, Codable {
    let date: String
    let size: String
    let repetitions: Int
    let command: String
    let machine: MachineDescription
    /// What each workload did at this size, by workload name (and curve id).
    let parameters: [String: String]
    var metrics: [MetricResult]
    var curves: [CurveResult]
    var workloads: [WorkloadDescription]

    struct WorkloadDescription: Sendable, Codable {
        let number: Int
        let name: String
        let title: String
        let how: [String: String]
    }
}

#if DEBUG
    let buildConfiguration = "debug"
#else
    let buildConfiguration = "release"
#endif

#if compiler(>=6.4)
    let swiftVersion = "Swift 6.4 or newer"
#elseif compiler(>=6.3.1)
    let swiftVersion = "Swift 6.3.1"
#elseif compiler(>=6.3)
    let swiftVersion = "Swift 6.3"
#else
    let swiftVersion = "Swift 6"
#endif

// MARK: Running

struct Benchmark {
    var size: BenchmarkSize
    /// Workload filters (name, part of the title, or number); empty runs everything.
    var filters: [String] = []
    /// The implementations to run (all by default; fewer when profiling one of them).
    var implementations: [Implementation] = Implementation.allCases
    /// Progress lines (stderr in the command-line tool).
    var progress: (String) -> Void = { _ in }

    var selectedWorkloads: [Workload] {
        guard !filters.isEmpty else { return Workloads.all }
        return Workloads.all.filter { workload in filters.contains { workload.matches($0) } }
    }

    /// Runs the selected workloads: implementations alternate (A B C A B C …) for each repetition,
    /// and every figure is the median over the repetitions.
    func run(command: String = "") -> Report {
        var metrics: [MetricResult] = []
        var curves: [CurveResult] = []
        var roundTrips: [Double] = []
        let startTime = MachineDescription.processorTime()
        for workload in selectedWorkloads {
            var samples: [Implementation: [Sample]] = [:]
            for repetition in 1...size.repetitions {
                if size.coreRoundTrips > 0,
                    let roundTrip = LibeventContender.coreRoundTripNanoseconds(rounds: size.coreRoundTrips)
                {
                    roundTrips.append(roundTrip)
                }
                switch workload.runner {
                case .each(let body):
                    for implementation in implementations {
                        progress(
                            "[\(workload.number) \(workload.name)] repetition \(repetition)/\(size.repetitions): \(implementation.rawValue)"
                        )
                        samples[implementation, default: []].append(body(implementation, size))
                    }
                case .together(let body):
                    progress(
                        "[\(workload.number) \(workload.name)] repetition \(repetition)/\(size.repetitions): all implementations at once"
                    )
                    for (implementation, sample) in body(size) where implementations.contains(implementation) {
                        samples[implementation, default: []].append(sample)
                    }
                }
            }
            metrics += workload.metrics.map { summarize($0, of: workload, samples) }
            curves += workload.curves.map { curve in
                var series: [String: [Double]] = [:]
                for implementation in Implementation.allCases {
                    let runs = (samples[implementation] ?? []).compactMap { $0.curves[curve.id] }
                    guard !runs.isEmpty else { continue }
                    series[implementation.rawValue] = Stats.curveQuantiles.indices.map { index in
                        Stats.median(runs.map { $0[index] })
                    }
                }
                return CurveResult(id: curve.id, title: curve.title, quantiles: Stats.curveQuantiles, series: series)
            }
        }
        let formatter = ISO8601DateFormatter()
        return Report(
            date: formatter.string(from: Date()), size: size.name, repetitions: size.repetitions, command: command,
            machine: .current(roundTrips: roundTrips, since: startTime), parameters: size.parameters, metrics: metrics,
            curves: curves,
            workloads: selectedWorkloads.map { workload in
                Report.WorkloadDescription(
                    number: workload.number, name: workload.name, title: workload.title,
                    how: Dictionary(uniqueKeysWithValues: workload.how.map { ($0.key.rawValue, $0.value) }))
            })
    }

    private func summarize(_ metric: Metric, of workload: Workload, _ samples: [Implementation: [Sample]])
        -> MetricResult
    {
        var result = MetricResult(
            id: metric.id, workload: workload.number, workloadName: workload.name, label: metric.label,
            unit: metric.unit, better: metric.direction, medians: [:], samples: [:], missing: [:],
            notes: Dictionary(uniqueKeysWithValues: metric.notes.map { ($0.key.rawValue, $0.value) }))
        for implementation in implementations {
            let runs = samples[implementation] ?? []
            let values = runs.compactMap { $0.values[metric.id] }
            if values.isEmpty {
                let reason = runs.compactMap { $0.missing[metric.id] }.first ?? "not measured"
                result.missing[implementation.rawValue] = reason
            } else {
                result.samples[implementation.rawValue] = values
                result.medians[implementation.rawValue] = Stats.median(values)
                if values.count < runs.count {
                    result.missing[implementation.rawValue] =
                        "\(runs.count - values.count) of \(runs.count) repetitions failed: "
                        + (runs.compactMap { $0.missing[metric.id] }.first ?? "?")
                }
            }
        }
        let own = result.median(.runLoopKit)
        result.ratioFoundation = Stats.ratio(own, result.median(.foundation))
        result.ratioLibevent = Stats.ratio(own, result.median(.libevent))
        result.ratioLibuv = Stats.ratio(own, result.median(.libuv))
        result.ratioGLib = Stats.ratio(own, result.median(.glib))
        return result
    }
}
