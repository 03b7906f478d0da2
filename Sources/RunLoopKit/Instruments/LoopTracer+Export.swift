// The tracer's exports: Chrome's trace-event JSON and an SVG timeline. Neither runs on a loop's hot
// path; both work on a snapshot taken under the tracer's lock.

extension LoopTracer {
    /// The events held, in Chrome's trace-event format (JSON object form), which Perfetto
    /// (https://ui.perfetto.dev) and `chrome://tracing` open.
    ///
    /// Each loop is a thread (`tid`: the loop thread's kernel id, named after the thread) of this
    /// process (`pid`). Callouts and waits are complete events (`"ph": "X"`, named after the
    /// callout kind or `waiting`, category `callout` or `wait`); phases are thread-scoped instant
    /// events (`"ph": "i"`, named after the activity, category `phase`). `ts` and `dur` are in
    /// microseconds since the tracer was created; `args` carry the mode, the nesting depth and,
    /// for posted work, the queue delay.
    ///
    /// Any thread.
    public func chromeTraceJSON() -> String {
        let (records, lanes, modes) = storage.withLock { ($0.ordered, $0.lanes, $0.modes) }
        let pid = Int(Platform.processID)
        var lines: [String] = []
        lines.reserveCapacity(records.count + 2 * lanes.count + 1)
        let process = LoopTracer.processName() ?? "process \(pid)"
        lines.append(
            #"{"name":"process_name","ph":"M","pid":\#(pid),"tid":\#(pid),"args":{"name":"\#(jsonEscaped(process))"}}"#
        )
        for (position, index) in LoopTracer.displayOrder(lanes).enumerated() {
            let lane = lanes[index]
            let label = lane.isMain ? "\(lane.threadName) (main loop)" : lane.threadName
            lines.append(
                #"{"name":"thread_name","ph":"M","pid":\#(pid),"tid":\#(lane.threadID),"args":{"name":"\#(jsonEscaped(label))"}}"#
            )
            lines.append(
                #"{"name":"thread_sort_index","ph":"M","pid":\#(pid),"tid":\#(lane.threadID),"args":{"sort_index":\#(position)}}"#
            )
        }
        for record in records {
            let tid = lanes[Int(record.lane)].threadID
            let ts = microseconds(record.start - origin)
            var args: [String] = []
            if record.mode != .max { args.append(#""mode":"\#(jsonEscaped(modes[Int(record.mode)].name))""#) }
            switch record.type {
            case .waiting:
                lines.append(
                    #"{"name":"waiting","cat":"wait","ph":"X","ts":\#(ts),"dur":\#(microseconds(record.duration)),"pid":\#(pid),"tid":\#(tid),"args":{\#(args.joined(separator: ","))}}"#
                )
            case .callout:
                let kind = LoopCalloutKind(rawValue: Int(record.detail)) ?? .block
                args.append(#""depth":\#(record.depth)"#)
                if record.queueDelay >= 0 { args.append(#""queueDelayUs":\#(microseconds(record.queueDelay))"#) }
                lines.append(
                    #"{"name":"\#(kind)","cat":"callout","ph":"X","ts":\#(ts),"dur":\#(microseconds(record.duration)),"pid":\#(pid),"tid":\#(tid),"args":{\#(args.joined(separator: ","))}}"#
                )
            case .phase:
                let activity = Loop.Activity(rawValue: 1 << UInt32(record.detail))
                lines.append(
                    #"{"name":"\#(activity)","cat":"phase","ph":"i","s":"t","ts":\#(ts),"pid":\#(pid),"tid":\#(tid),"args":{\#(args.joined(separator: ","))}}"#
                )
            }
        }
        return "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + lines.joined(separator: ",\n") + "\n]}\n"
    }

    /// The events held, drawn as an SVG timeline `width` pixels wide: one lane per loop (labelled
    /// with its thread's name and id), time running left to right with a labelled axis, the
    /// loop's sleeps in the kernel as a pale band, callouts as coloured bars (timers, sources,
    /// blocks and jobs, observers, descriptors, the main queue; nested callouts inset), the start
    /// and end of runs as thin marks labelled with the run's mode, and a legend. Callouts too
    /// short to see are drawn 1.5 pixels wide, and neighbours closer than a pixel are merged (hover shows the count).
    ///
    /// Any thread.
    public func svgTimeline(width: Int = 1200) -> String {
        let (records, lanes, modes) = storage.withLock { ($0.ordered, $0.lanes, $0.modes) }
        return SVGTimeline(records: records, lanes: lanes, modes: modes, width: max(width, 480)).render()
    }

    /// Lane indices in display order: the main loop first, then the others as they were first seen.
    static func displayOrder(_ lanes: [Lane]) -> [Int] {
        lanes.indices.filter { lanes[$0].isMain } + lanes.indices.filter { !lanes[$0].isMain }
    }

    /// The tracer's time origin, in ticks: exported times count from here.
    var origin: Ticks { TickClock.ticks(createdAt) }

    /// The process's name, from `/proc/self/comm` (nil where unavailable).
    static func processName() -> String? {
        procText("/proc/self/comm")
    }
}

// MARK: - Formatting

/// `ticks` (nanoseconds) as microseconds with three decimals, e.g. `1234.567`.
private func microseconds(_ ticks: Ticks) -> String {
    let sign = ticks < 0 ? "-" : ""
    let magnitude = ticks.magnitude
    let fraction = String(magnitude % 1000)
    return "\(sign)\(magnitude / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
}

private func jsonEscaped(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out
}

func xmlEscaped(_ text: String) -> String {
    var out = ""
    for character in text {
        switch character {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        default: out.append(character)
        }
    }
    return out
}

/// A coordinate with at most one decimal, e.g. `12.5`.
func number(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    let sign = tenths < 0 ? "-" : ""
    let magnitude = tenths.magnitude
    return magnitude % 10 == 0 ? "\(sign)\(magnitude / 10)" : "\(sign)\(magnitude / 10).\(magnitude % 10)"
}

/// A duration in nanoseconds for people: `850 ns`, `12.3 µs`, `4.56 ms`, `1.2 s`.
func humanDuration(_ nanoseconds: Ticks) -> String {
    func scaled(_ value: Double, _ unit: String) -> String {
        let digits = value >= 100 ? 0 : value >= 10 ? 1 : 2
        var factor = 1.0
        for _ in 0..<digits { factor *= 10 }
        let rounded = (value * factor).rounded() / factor
        var text = digits == 0 ? String(Int(rounded)) : String(rounded)
        if text.contains(".") {
            while text.last == "0" { text.removeLast() }
            if text.last == "." { text.removeLast() }
        }
        return "\(text) \(unit)"
    }
    let value = Double(nanoseconds)
    if nanoseconds < 1000 { return "\(nanoseconds) ns" }
    if nanoseconds < 1_000_000 { return scaled(value / 1e3, "µs") }
    if nanoseconds < 1_000_000_000 { return scaled(value / 1e6, "ms") }
    return scaled(value / 1e9, "s")
}
