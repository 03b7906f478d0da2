import Foundation
import Testing

@testable import runloop_bench

/// Runs every workload of the benchmark in a tiny size so that it never rots: every figure is
/// produced on every implementation and is sane. Nothing here measures speed.
@Suite(.serialized) struct BenchSmokeTests {
    /// One tiny run shared by the checks below (it takes a few seconds, even in a debug build).
    /// Workloads 9 and 10 (Swift concurrency) wait for the cooperative thread pool, which the test
    /// runner keeps busy with its own synchronous tests: they run in a child process below.
    static let concurrencyWorkloads: Set<Int> = [9, 10]
    static let inProcess = Workloads.all.filter { !concurrencyWorkloads.contains($0.number) }
    static let report = Benchmark(size: .tiny, filters: inProcess.map { "\($0.number)" })
        .run(command: "runloop-bench --tiny")

    @Test func everyWorkloadRan() {
        let ran = Set(Self.report.metrics.map(\.workload))
        #expect(ran == Set(Self.inProcess.map(\.number)))
        #expect(Self.report.metrics.count == Self.inProcess.flatMap(\.metrics).count)
    }

    /// The Swift-concurrency workloads, in a process of their own (with its own thread pool).
    @Test func concurrencyWorkloadsRun() async {
        await #expect(processExitsWith: .success) {
            let report = Benchmark(size: .tiny, filters: BenchSmokeTests.concurrencyWorkloads.map { "\($0)" }).run()
            let ids = [
                MetricID.actorHopLoop, MetricID.actorHopDefault, MetricID.actorHopLoopP50,
                MetricID.actorHopDefaultP50, MetricID.jobsLoop, MetricID.jobsDefault,
            ]
            let positive = ids.allSatisfy { id in
                (report.metrics.first { $0.id == id }?.median(.runLoopKit) ?? 0) > 0
            }
            exit(positive ? 0 : 1)
        }
    }

    /// Figures of RunLoopKit's own instruments and of Swift concurrency executors, which the other
    /// implementations do not have.
    static let runLoopKitOnly: Set<String> = [
        MetricID.iterationMetrics, MetricID.iterationTracer, MetricID.actorHopLoop, MetricID.actorHopDefault,
        MetricID.actorHopLoopP50, MetricID.actorHopDefaultP50, MetricID.jobsLoop, MetricID.jobsDefault,
        MetricID.pingPongNoSpinP50, MetricID.pingPongNoSpinCPU, MetricID.performFloor1, MetricID.performFloor4,
        MetricID.portFloor1, MetricID.portFloor4, MetricID.sharedWord4, MetricID.scaleFloor,
    ]

    /// The socket workloads' figures, measured on RunLoopKit and the C peers only.
    static let socketFigures: Set<String> = [
        MetricID.tcpBulk, MetricID.tcpEcho1, MetricID.tcpEcho1P50, MetricID.tcpEcho1P99, MetricID.tcpEcho100,
        MetricID.tcpIdleMemory, MetricID.udpEcho, MetricID.udpFlood,
    ]
    static let socketImplementations: [Implementation] = [.runLoopKit, .libevent, .libuv, .glib]

    /// The datagram workloads' figures, measured on RunLoopKit, libevent and libuv only.
    static let datagramFigures: Set<String> = [MetricID.udpEcho, MetricID.udpFlood]

    /// Figures of custom event sources, which libevent does not have.
    static let sourceFigures: Set<String> = [MetricID.scaleSources]

    /// The file-watch figure, measured on RunLoopKit and libuv only (the others have no file
    /// watching on their loops, or the benchmark does not link it).
    static let fileWatchFigures: Set<String> = [MetricID.fileWatchEvents]
    static let fileWatchImplementations: [Implementation] = [.runLoopKit, .libuv]

    @Test func everyFigureIsMeasuredOnEveryImplementation() {
        for metric in Self.report.metrics {
            for implementation in Implementation.allCases
            where implementation == .runLoopKit
                || !Self.runLoopKitOnly.contains(metric.id)
                    && (Self.socketImplementations.contains(implementation) || !Self.socketFigures.contains(metric.id))
                    && (implementation != .libevent || !Self.sourceFigures.contains(metric.id))
                    && (implementation != .glib || !Self.datagramFigures.contains(metric.id))
                    && (Self.fileWatchImplementations.contains(implementation)
                        || !Self.fileWatchFigures.contains(metric.id))
            {
                let value = metric.median(implementation)
                #expect(
                    value != nil,
                    "\(metric.label) on \(implementation.rawValue): \(metric.missing[implementation.rawValue] ?? "")")
                #expect(
                    value?.isFinite ?? true,
                    "\(metric.label) on \(implementation.rawValue) is \(String(describing: value))")
            }
        }
    }

    private func figure(_ id: String, _ implementation: Implementation) -> Double? {
        Self.report.metrics.first { $0.id == id }?.median(implementation)
    }

    @Test func runLoopKitOnlyFiguresArePositiveAndMissingElsewhere() {
        for id in Self.runLoopKitOnly where Self.report.metrics.contains(where: { $0.id == id }) {
            let value = figure(id, .runLoopKit)
            #expect((value ?? 0) > 0, "\(id): \(String(describing: value))")
            let metric = Self.report.metrics.first { $0.id == id }
            for implementation in Implementation.peers {
                #expect(metric?.median(implementation) == nil)
                #expect(metric?.missing[implementation.rawValue]?.isEmpty == false, "\(id) on \(implementation)")
            }
        }
    }

    @Test(arguments: Implementation.allCases)
    func ratesArePositive(_ implementation: Implementation) {
        for id in [
            MetricID.post1, MetricID.post4, MetricID.post1CaptureFree, MetricID.post4CaptureFree,
            MetricID.post1Typical, MetricID.post4Typical, MetricID.churn,
            MetricID.iteration0, MetricID.iteration6, MetricID.descriptor, MetricID.scheduleCancel,
            MetricID.scheduleHalfFired, MetricID.scaleTimers,
        ] + (implementation == .libevent ? [] : [MetricID.scaleSources]) {
            let value = figure(id, implementation)
            #expect((value ?? 0) > 0, "\(id) on \(implementation.rawValue): \(String(describing: value))")
        }
    }

    /// libevent's custom-source rows are missing, with the reason and a note saying so.
    @Test func sourceFiguresAreMissingWithAReasonOnLibevent() {
        for metric in Self.report.metrics where Self.sourceFigures.contains(metric.id) {
            #expect(metric.median(.libevent) == nil)
            #expect(metric.missing[Implementation.libevent.rawValue]?.contains("no custom event sources") == true)
            #expect(metric.notes[Implementation.libevent.rawValue]?.contains("not measured") == true)
        }
    }

    /// The file-watch row is missing, with a note saying why, where it is not measured.
    @Test func fileWatchFigureIsMissingWithANoteElsewhere() {
        for metric in Self.report.metrics where Self.fileWatchFigures.contains(metric.id) {
            for implementation in Implementation.allCases where !Self.fileWatchImplementations.contains(implementation)
            {
                #expect(metric.median(implementation) == nil)
                #expect(metric.notes[implementation.rawValue]?.contains("not measured") == true, "\(implementation)")
            }
        }
    }

    /// The scale rows remove their items in one fixed permutation of all of them.
    @Test func scaleRemovalOrderIsAFixedPermutation() {
        let order = Workloads.scaleRemovalOrder(count: 1_000)
        #expect(order.sorted() == Array(0..<1_000))
        #expect(order != Array(0..<1_000))
        #expect(order == Workloads.scaleRemovalOrder(count: 1_000))
    }

    /// A C peer's socket run that fails says which step failed and how far it got: here a bulk
    /// run of 1 GiB given 1 ms.
    @Test func aFailedSocketRunSaysWhy() {
        let outcome = LibeventContender.bulk(bytes: 1 << 30, chunk: 64 * 1024, timeout: 0.001)
        guard case .failure(let error) = outcome else {
            Issue.record("1 GiB in 1 ms: \(outcome)")
            return
        }
        #expect(
            error.reason.hasPrefix("the run did not reach its end within the timeout; bytes received of 1073741824:"))
    }

    /// Bulk throughput, round trips and memory per idle connection over loopback TCP.
    @Test(arguments: BenchSmokeTests.socketImplementations)
    func socketFiguresAreSane(_ implementation: Implementation) throws {
        for id in [MetricID.tcpBulk, MetricID.tcpEcho1, MetricID.tcpEcho100] {
            let value = figure(id, implementation)
            #expect((value ?? 0) > 0, "\(id) on \(implementation.rawValue): \(String(describing: value))")
        }
        let p50 = try #require(figure(MetricID.tcpEcho1P50, implementation))
        let p99 = try #require(figure(MetricID.tcpEcho1P99, implementation))
        #expect(p50 > 0)
        #expect(p50 <= p99)
        // Only the size is checked: a tiny RSS delta may be zero or even slightly negative.
        #expect(try #require(figure(MetricID.tcpIdleMemory, implementation)).isFinite)
    }

    /// The peers without socket workloads say so, on every socket row and in the notes.
    @Test func socketFiguresAreMissingWithAReasonElsewhere() {
        for metric in Self.report.metrics where Self.socketFigures.contains(metric.id) {
            for implementation in Implementation.allCases where !Self.socketImplementations.contains(implementation) {
                #expect(metric.median(implementation) == nil)
                #expect(metric.missing[implementation.rawValue]?.isEmpty == false, "\(metric.id) on \(implementation)")
            }
        }
        for id in [MetricID.tcpBulk, MetricID.tcpEcho1, MetricID.tcpIdleMemory] {
            let notes = Self.report.metrics.first { $0.id == id }?.notes ?? [:]
            #expect(
                Set(notes.keys)
                    == Set(Implementation.allCases.filter { !Self.socketImplementations.contains($0) }.map(\.rawValue)))
        }
    }

    /// Measured before every repetition when the process may use two processors.
    @Test func coreRoundTripIsSane() throws {
        let twoProcessors = LibeventContender.allowedProcessors >= 2
        guard let roundTrip = Self.report.machine.coreRoundTrip else {
            #expect(!twoProcessors, "no cache-line round trip measured on a machine with two processors")
            return
        }
        #expect(roundTrip.samples == Self.report.repetitions * Self.inProcess.count)
        #expect(roundTrip.min > 0)
        #expect(roundTrip.min <= roundTrip.median && roundTrip.median <= roundTrip.max)
        // Nanoseconds, not seconds or microseconds: a round trip between two processors takes
        // tens to a few thousand of them.
        #expect(roundTrip.max < 1_000_000)
    }

    /// Read from /proc/stat before and after the run.
    @Test func stolenTimeIsAPercentage() throws {
        let stolen = try #require(Self.report.machine.stolenPercent)
        #expect(stolen >= 0 && stolen <= 100)
    }

    @Test(arguments: Implementation.allCases)
    func latenciesAreOrdered(_ implementation: Implementation) throws {
        let p50 = try #require(figure(MetricID.pingPongP50, implementation))
        let p99 = try #require(figure(MetricID.pingPongP99, implementation))
        #expect(p50 > 0)
        #expect(p50 <= p99)
        let cpu = try #require(figure(MetricID.pingPongCPU, implementation))
        #expect(cpu > 0)

        let schedule = try #require(figure(MetricID.timerSchedule, implementation))
        let late50 = try #require(figure(MetricID.timerP50, implementation))
        let late99 = try #require(figure(MetricID.timerP99, implementation))
        let lateMax = try #require(figure(MetricID.timerMax, implementation))
        #expect(schedule > 0)
        #expect(late50 <= late99)
        #expect(late99 <= lateMax)
        // Every timer is due by the end of the spread, and none fires before it is due.
        let allFired = try #require(figure(MetricID.timerAllFired, implementation))
        #expect(allFired >= BenchmarkSize.tiny.timerSpread * 0.99)
        #expect(allFired < BenchmarkSize.tiny.timerSpread + BenchmarkSize.tiny.timeout)
        if implementation != .foundation {
            // Never before the fire date (Foundation's fire dates are wall-clock times, so a clock
            // step could show as a small negative lateness there).
            #expect(late50 >= 0)
        }
    }

    @Test(arguments: Implementation.allCases)
    func idleAndMemoryFiguresAreSane(_ implementation: Implementation) throws {
        let idle = try #require(figure(MetricID.idleNone, implementation))
        let ticking = try #require(figure(MetricID.idle1Hz, implementation))
        #expect(idle >= 0)
        #expect(ticking >= 0)
        // Only the size is checked: a tiny RSS delta may be zero or even slightly negative.
        #expect(try #require(figure(MetricID.memoryTimer, implementation)).isFinite)
        #expect(try #require(figure(MetricID.memoryLoop, implementation)).isFinite)
    }

    @Test func latencyCurvesRiseWithThePercentile() {
        #expect(Set(Self.report.curves.map(\.id)) == [MetricID.pingPongCurve, MetricID.timerCurve])
        for curve in Self.report.curves {
            #expect(curve.quantiles.count == Stats.curveQuantiles.count)
            for implementation in Implementation.allCases {
                let points = curve.series[implementation.rawValue] ?? []
                #expect(points.count == curve.quantiles.count, "\(curve.id) on \(implementation.rawValue)")
                #expect(
                    zip(points, points.dropFirst()).allSatisfy { $0 <= $1 }, "\(curve.id) on \(implementation.rawValue)"
                )
            }
        }
    }

    @Test(arguments: Implementation.peers)
    func ratiosAreRunLoopKitOverTheOthers(_ peer: Implementation) throws {
        for metric in Self.report.metrics {
            guard let own = metric.median(.runLoopKit), let other = metric.median(peer), other != 0 else {
                continue
            }
            let ratio = try #require(metric.ratio(to: peer))
            #expect(abs(ratio - own / other) <= 1e-9 * max(1, abs(ratio)))
        }
    }

    @Test func outputsAreWritten() throws {
        let table = Self.report.table()
        for metric in Self.report.metrics { #expect(table.contains(metric.label)) }
        for peer in Implementation.peers { #expect(table.contains("RLK/\(peer.shortName)")) }
        #expect(Self.report.heading().contains("libuv \(LibuvContender.version)"))
        #expect(Self.report.heading().contains("GLib \(GLibContender.version)"))
        #expect(!Self.report.targetChecks().isEmpty)

        let data = try Self.report.json()
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let reread = try Report.decode(data)
        #expect(reread.metrics.map(\.id) == Self.report.metrics.map(\.id))
        #expect(reread.table() == table)
        #expect((json?["metrics"] as? [Any])?.count == Self.report.metrics.count)
        #expect((json?["targets"] as? [Any])?.isEmpty == false)

        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("runloop-bench-charts-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let written = try Charts.write(Self.report, to: directory)
        #expect(
            Set(written.map { ($0 as NSString).lastPathComponent }) == [
                "ratios.svg", "pingpong-latency.svg", "timer-lateness.svg",
            ])
        for path in written {
            let svg = try String(contentsOfFile: path, encoding: .utf8)
            #expect(svg.hasPrefix("<svg"))
            #expect(svg.hasSuffix("</svg>\n"))
        }
    }

    /// The post workload with its threads pinned: every figure is produced, or, with one
    /// processor, placement apart is refused with a reason.
    @Test(arguments: [PostPlacement.apart, .together])
    func postWithPinnedThreads(_ placement: PostPlacement) {
        var size = BenchmarkSize.tiny
        size.postPlacement = placement
        let report = Benchmark(size: size, filters: ["post"]).run()
        let refused = placement == .apart && LibeventContender.allowedProcessors < 2
        for metric in report.metrics {
            for implementation in Implementation.allCases {
                if refused {
                    #expect(metric.missing[implementation.rawValue] == "placement apart needs two processors")
                } else {
                    let value = metric.median(implementation) ?? 0
                    #expect(value > 0, "\(metric.label) on \(implementation.rawValue), \(placement)")
                }
            }
        }
        #expect(report.parameters["post"]?.contains("pinned") == true)
    }

    /// `--post-floor`: every row is measured (the unretained variant through RunLoopKit's own
    /// post path; a row that fails, such as counted libuv posts whose counts do not come back to
    /// zero, makes it exit 1), one row can be run alone, and bad arguments are a usage error.
    @Test func postFloorRuns() {
        for producers in [1, 4] {
            let outcome = RunLoopKitContender.postThroughput(
                producers: producers, blocks: 2_000, capture: .typicalUnretained, pinnedTo: nil, timeout: 30)
            guard case .success(let rate) = outcome else {
                Issue.record("unretained typical posts failed: \(outcome)")
                continue
            }
            #expect(rate > 0)
        }
        #expect(PostFloor.main(["1", "2000"]) == 0)
        // Pinned apart where the process may use two processors; refused with 1 where it may not.
        let apart = PostFloor.main(["1", "2000", "--placement", "apart"])
        let twoProcessors: Bool
        if case .success = PostPlacement.apart.processors() { twoProcessors = true } else { twoProcessors = false }
        #expect(apart == (twoProcessors ? 0 : 1))
        #expect(PostFloor.main(["0"]) == 2)
        #expect(PostFloor.main(["1", "many"]) == 2)
        #expect(PostFloor.main(["1", "2000", "--placement", "sideways"]) == 2)
        #expect(PostFloor.main(["--placement", "apart", "1"]) == 2)
        // One row and one producer count alone, the options in any order.
        for row in PostFloor.rowNames {
            #expect(PostFloor.main(["1", "2000", "--row", row, "--producers", "2"]) == 0, "row \(row)")
        }
        #expect(PostFloor.main(["1", "2000", "--producers", "1", "--placement", "together", "--row", "counted"]) == 0)
        #expect(PostFloor.main(["1", "2000", "--row", "everything"]) == 2)
        #expect(PostFloor.main(["1", "2000", "--producers", "0"]) == 2)
        #expect(PostFloor.main(["1", "2000", "--sideways", "1"]) == 2)
    }

    @Test func commandLineOptions() throws {
        let options = try CommandLineTool.parse([
            "--quick", "--filter", "post", "--filter", "3", "--json", "out.json", "--no-charts", "--only", "libevent",
            "--only", "glib",
        ])
        #expect(options.size.name == "quick")
        #expect(options.filters == ["post", "3"])
        #expect(options.jsonPath == "out.json")
        #expect(options.chartsDirectory == nil)
        #expect(options.implementations == [.libevent, .glib])
        #expect(throws: CommandLineTool.UsageError.self) { try CommandLineTool.parse(["--bogus"]) }
        let tuned = try CommandLineTool.parse(["--set", "timerSpread=0", "--set", "timerCount=10"])
        #expect(tuned.size.timerSpread == 0)
        #expect(tuned.size.timerCount == 10)
        #expect(throws: CommandLineTool.UsageError.self) { try CommandLineTool.parse(["--set", "nonsense=1"]) }
        #expect(options.size.postPlacement == .scheduler)
        #expect(try CommandLineTool.parse(["--placement", "apart"]).size.postPlacement == .apart)
        #expect(throws: CommandLineTool.UsageError.self) { try CommandLineTool.parse(["--placement", "elsewhere"]) }

        let selected = Benchmark(size: .tiny, filters: ["post", "3"]).selectedWorkloads.map(\.name)
        #expect(selected == ["post", "timers"])
    }
}
