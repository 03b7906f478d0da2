import Foundation

/// `runloop-bench [--quick] [--filter NAME]… [--json PATH] [--charts DIR | --no-charts]`
enum CommandLineTool {
    struct Options {
        var size = BenchmarkSize.full
        var filters: [String] = []
        var jsonPath: String?
        var chartsDirectory: String? = "docs/benchmarks"
        var implementations: [Implementation] = []
        var list = false
        var fromJSON: String?
    }

    static let usage = """
        usage: runloop-bench [options]

        RunLoopKit side by side with Foundation's RunLoop (CoreFoundation), and raw libevent, libuv and
        GLib in C.
        Implementations alternate within each repetition; every figure is the median.

          --quick            a run under 30 s (3 repetitions, smaller workloads)
          --tiny             the smoke test's sizes: a few seconds, figures not meaningful
          --filter NAME      run only workloads whose name, title or number matches (repeatable):
                             post, pingpong, timers, churn, iteration, descriptor, idle, memory,
                             actorhop, jobs, bulk, echo, connections, schedule, scale, port,
                             datagrams, filewatch
          --json PATH        also write the report as JSON to PATH
          --charts DIR       write the SVG charts to DIR (default: docs/benchmarks)
          --no-charts        do not write charts
          --repetitions N    override the number of repetitions
          --only IMPL        run only RunLoopKit, Foundation, libevent, libuv or GLib (repeatable; for
                             profiling)
          --set KEY=VALUE    override one size parameter (for profiling), e.g. --set timerSpread=0;
                             keys: \(BenchmarkSize.keys.joined(separator: ", "))
          --placement WHERE  where the post workload's threads run: scheduler (the default), apart
                             (loop thread and producers pinned to two processors) or together (all on one)
          --post-floor [N [BLOCKS]]  only the typical-closure posts, beside what separates their costs
                             (a bare locked queue of the closures, the objects unretained, libuv's
                             item with reference counts): N repetitions (5) of BLOCKS blocks (500000);
                             after the counts, --placement WHERE, and for a profiler --row NAME (queue,
                             RunLoopKit, unretained, counted or libuv: that row alone) and --producers N
          --from-json PATH   measure nothing: print the table of a saved JSON report and redraw its charts
          --list             list the workloads and exit
          -h, --help         this text
        """

    static func parse(_ arguments: [String]) throws(UsageError) -> Options {
        var options = Options()
        var iterator = arguments.makeIterator()
        func value(for flag: String) throws(UsageError) -> String {
            guard let value = iterator.next() else { throw UsageError(message: "\(flag) needs a value") }
            return value
        }
        while let argument = iterator.next() {
            switch argument {
            case "--quick": options.size = .quick
            case "--tiny": options.size = .tiny
            case "--filter": options.filters.append(try value(for: argument))
            case "--json": options.jsonPath = try value(for: argument)
            case "--charts": options.chartsDirectory = try value(for: argument)
            case "--no-charts": options.chartsDirectory = nil
            case "--repetitions":
                guard let count = Int(try value(for: argument)), count > 0 else {
                    throw UsageError(message: "--repetitions needs a positive number")
                }
                options.size.repetitions = count
            case "--only":
                let name = try value(for: argument)
                guard
                    let implementation = Implementation.allCases.first(where: {
                        $0.rawValue.lowercased() == name.lowercased()
                    })
                else { throw UsageError(message: "--only takes RunLoopKit, Foundation, libevent, libuv or GLib") }
                options.implementations.append(implementation)
            case "--set":
                let assignment = try value(for: argument)
                let parts = assignment.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, options.size.set(parts[0], parts[1]) else {
                    throw UsageError(
                        message: "--set takes KEY=VALUE with a key among \(BenchmarkSize.keys.joined(separator: ", "))")
                }
            case "--placement":
                guard let placement = PostPlacement(rawValue: try value(for: argument)) else {
                    throw UsageError(message: "--placement takes scheduler, apart or together")
                }
                options.size.postPlacement = placement
            case "--from-json": options.fromJSON = try value(for: argument)
            case "--list": options.list = true
            case "-h", "--help": throw UsageError(message: nil)
            default: throw UsageError(message: "unknown option \(argument)")
            }
        }
        return options
    }

    struct UsageError: Error {
        /// nil: help was asked for.
        let message: String?
    }

    static func debugWarning() -> String {
        let bar = String(repeating: "!", count: 78)
        return """
            \(bar)
            !!  WARNING: this is a DEBUG build of runloop-bench. Its figures are meaningless.
            !!  Build and run the release build: make bench   (swift build -c release)
            \(bar)
            """
    }

    /// Prints the table of a saved report and redraws its charts.
    static func replay(_ path: String, chartsDirectory: String?) -> Int32 {
        let report: Report
        do {
            report = try Report.decode(Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            FileHandle.standardError.write(Data("runloop-bench: cannot read a report from \(path): \(error)\n".utf8))
            return 1
        }
        print(report.heading())
        print("")
        print(report.table())
        print("")
        print(report.targetsText())
        guard let chartsDirectory else { return 0 }
        do {
            for chart in try Charts.write(report, to: chartsDirectory) { print("chart: \(chart)") }
        } catch {
            FileHandle.standardError.write(
                Data("runloop-bench: cannot write charts to \(chartsDirectory): \(error)\n".utf8))
            return 1
        }
        return 0
    }

    /// Runs the tool; returns the process exit status.
    static func main(_ arguments: [String]) -> Int32 {
        if arguments.count > 1, arguments[1] == MemoryProbe.flag {
            return MemoryProbe.main(Array(arguments.dropFirst(2)))
        }
        if arguments.count > 1, arguments[1] == PostFloor.flag {
            return PostFloor.main(Array(arguments.dropFirst(2)))
        }
        let options: Options
        do {
            options = try parse(Array(arguments.dropFirst()))
        } catch {
            if let message = error.message {
                FileHandle.standardError.write(Data("runloop-bench: \(message)\n\n\(usage)\n".utf8))
                return 2
            }
            print(usage)
            return 0
        }
        if options.list {
            for workload in Workloads.all {
                print(
                    "\(workload.number)  \(workload.name.padding(toLength: 11, withPad: " ", startingAt: 0))\(workload.title)"
                )
            }
            return 0
        }
        if let path = options.fromJSON {
            return replay(path, chartsDirectory: options.chartsDirectory)
        }
        #if DEBUG
            print(debugWarning())
        #endif

        var benchmark = Benchmark(size: options.size, filters: options.filters)
        if !options.implementations.isEmpty { benchmark.implementations = options.implementations }
        guard !benchmark.selectedWorkloads.isEmpty else {
            FileHandle.standardError.write(Data("runloop-bench: no workload matches \(options.filters)\n".utf8))
            return 2
        }
        let started = monotonicSeconds()
        benchmark.progress = { line in
            let elapsed = String(format: "%6.1f s", monotonicSeconds() - started)
            FileHandle.standardError.write(Data("  \(elapsed)  \(line)\n".utf8))
        }
        let report = benchmark.run(command: (["runloop-bench"] + arguments.dropFirst()).joined(separator: " "))
        let elapsed = monotonicSeconds() - started

        print(report.heading())
        print("")
        print(report.table())
        print("")
        print(report.targetsText())
        print("")
        print(String(format: "finished in %.1f s", elapsed))

        var status: Int32 = 0
        if let path = options.jsonPath {
            do {
                let url = URL(fileURLWithPath: path)
                try FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try report.json().write(to: url)
                print("JSON: \(path)")
            } catch {
                FileHandle.standardError.write(Data("runloop-bench: cannot write \(path): \(error)\n".utf8))
                status = 1
            }
        }
        if let directory = options.chartsDirectory {
            do {
                for path in try Charts.write(report, to: directory) { print("chart: \(path)") }
            } catch {
                FileHandle.standardError.write(
                    Data("runloop-bench: cannot write charts to \(directory): \(error)\n".utf8))
                status = 1
            }
        }
        #if DEBUG
            print(debugWarning())
        #endif
        return status
    }
}
