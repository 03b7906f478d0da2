import Foundation

// The human-readable table, the target checks and the JSON document.

/// A target from the project's performance contract, checked against a report.
struct TargetCheck: Sendable, Codable {
    let target: String
    /// nil when a figure it needs is missing.
    let met: Bool?
    let detail: String
}

enum Formatting {
    /// A figure in its unit's usual form: rates with k/M, latencies with three significant digits.
    static func value(_ value: Double, unit: String) -> String {
        guard value.isFinite else { return "n/a" }
        if unit.hasSuffix("/s") && !unit.hasPrefix("wake") && unit != "GB/s" {
            let magnitude = abs(value)
            if magnitude >= 1e6 { return String(format: "%.2f M", value / 1e6) }
            if magnitude >= 1e3 { return String(format: "%.1f k", value / 1e3) }
            return String(format: "%.0f", value)
        }
        if unit == "wake-ups/s" { return String(format: "%.2f", value) }
        if unit == "bytes" { return grouped(Int(value.rounded())) }
        return significant(value)
    }

    /// Three significant digits, no exponent.
    static func significant(_ value: Double) -> String {
        let magnitude = abs(value)
        if magnitude >= 1000 { return grouped(Int(value.rounded())) }
        if magnitude >= 100 { return String(format: "%.0f", value) }
        if magnitude >= 10 { return String(format: "%.1f", value) }
        if magnitude >= 1 { return String(format: "%.2f", value) }
        if magnitude == 0 { return "0" }
        return String(format: "%.3f", value)
    }

    static func grouped(_ value: Int) -> String {
        let digits = String(abs(value))
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return (value < 0 ? "-" : "") + out
    }

    static func ratio(_ ratio: Double?) -> String {
        guard let ratio else { return "—" }
        if ratio >= 100 { return String(format: "%.0f×", ratio) }
        if ratio >= 10 { return String(format: "%.1f×", ratio) }
        if ratio >= 0.1 || ratio == 0 { return String(format: "%.2f×", ratio) }
        return String(format: "%.2g×", ratio)
    }
}

extension Report {
    /// The table: one line per figure with every implementation's median and RunLoopKit's ratios.
    func table() -> String {
        let header =
            ["#", "figure", "unit", "better"] + Implementation.allCases.map(\.rawValue)
            + Implementation.peers.map { "RLK/\($0.shortName)" }
        var rows: [[String]] = []
        var notes: [String] = []
        var caveats: [String] = []
        for metric in metrics {
            var row = ["\(metric.workload)", metric.label, metric.unit, metric.better.rawValue]
            for implementation in Implementation.allCases {
                var cell = metric.median(implementation).map { Formatting.value($0, unit: metric.unit) } ?? "n/a"
                if let reason = metric.missing[implementation.rawValue] {
                    notes.append("\(metric.label), \(implementation.rawValue): \(reason)")
                }
                if let caveat = metric.notes[implementation.rawValue] {
                    caveats.append("[\(caveats.count + 1)] \(metric.label), \(implementation.rawValue): \(caveat)")
                    cell += " [\(caveats.count)]"
                }
                row.append(cell)
            }
            row += Implementation.peers.map { Formatting.ratio(metric.ratio(to: $0)) }
            rows.append(row)
        }
        let widths = header.indices.map { column in
            ([header] + rows).map { $0[column].count }.max() ?? 0
        }
        let leftAligned: Set<Int> = [1, 2, 3]
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return leftAligned.contains(column) ? cell + pad : pad + cell
            }.joined(separator: "  ")
        }
        var out = [line(header), line(widths.map { String(repeating: "-", count: $0) })]
        out += rows.map(line)
        if !caveats.isEmpty {
            out.append("")
            out += caveats
        }
        if !notes.isEmpty {
            out.append("")
            out.append("Not measured:")
            out += notes.map { "  - \($0)" }
        }
        return out.joined(separator: "\n")
    }

    /// The header above the table: what ran, where.
    func heading() -> String {
        var conditions: [String] = []
        if let roundTrip = machine.coreRoundTrip {
            conditions.append("cache line round trip between two: \(roundTrip.text)")
        }
        if let stolen = machine.stolenPercent {
            conditions.append("time stolen by the hypervisor: \(String(format: "%.1f", stolen)) %")
        }
        let conditionsText = conditions.isEmpty ? "" : " (" + conditions.joined(separator: "; ") + ")"
        return """
            runloop-bench: \(size) run, \(repetitions) repetition\(repetitions == 1 ? "" : "s") \
            (implementations alternating), medians; \(machine.build) build
            machine: \(machine.cpu), \(machine.cores) cores\(conditionsText), Linux \(machine.kernel), \(machine.swift), \
            libevent \(machine.libevent)\(machine.libuv.map { ", libuv \($0)" } ?? "")\(machine.glib.map { ", GLib \($0)" } ?? "")
            ratios: RunLoopKit's figure divided by the other's (see "better" for which way is good)
            """
    }

    /// The project's performance targets, checked against this report's medians.
    func targetChecks() -> [TargetCheck] {
        func metric(_ id: String) -> MetricResult? { metrics.first { $0.id == id } }
        var checks: [TargetCheck] = []

        func ratioCheck(
            _ target: String, _ ids: [String], _ ratio: (MetricResult) -> Double?, _ passes: (Double) -> Bool
        ) {
            let found = ids.compactMap(metric)
            guard !found.isEmpty else { return }
            let ratios = found.map { ($0.label, ratio($0)) }
            let met: Bool? = ratios.contains { $0.1 == nil } ? nil : ratios.allSatisfy { passes($0.1!) }
            let detail = ratios.map { "\($0.0): \(Formatting.ratio($0.1))" }.joined(separator: ", ")
            checks.append(TargetCheck(target: target, met: met, detail: detail))
        }
        func valueCheck(_ target: String, _ id: String, _ passes: (Double) -> Bool) {
            guard let found = metric(id) else { return }
            let value = found.median(.runLoopKit)
            let detail =
                "\(found.label): " + (value.map { Formatting.value($0, unit: found.unit) + " " + found.unit } ?? "n/a")
            checks.append(TargetCheck(target: target, met: value.map(passes), detail: detail))
        }

        ratioCheck("post throughput ≥ 20× Foundation", [MetricID.post1, MetricID.post4], \.ratioFoundation) { $0 >= 20 }
        ratioCheck("post throughput ≥ 0.3× raw libevent", [MetricID.post1, MetricID.post4], \.ratioLibevent) {
            $0 >= 0.3
        }
        let typical = [MetricID.post1Typical, MetricID.post4Typical]
        ratioCheck("typical-closure post ≥ 20× Foundation", typical, \.ratioFoundation) { $0 >= 20 }
        let port = [MetricID.port1, MetricID.port4]
        ratioCheck("port messages ≥ 1.5× libuv's typical item", port, \.ratioLibuv) { $0 >= 1.5 }
        ratioCheck("port messages ≥ 30× Foundation's typical closure", port, \.ratioFoundation) { $0 >= 30 }
        valueCheck("typical-closure perform ≥ 1.0× a bare locked queue (1 producer)", MetricID.performFloor1) {
            $0 >= 1
        }
        valueCheck("typical-closure perform ≥ 1.0× a bare locked queue (4 producers)", MetricID.performFloor4) {
            $0 >= 1
        }
        ratioCheck("ping-pong p50 ≤ 0.7× Foundation", [MetricID.pingPongP50], \.ratioFoundation) { $0 <= 0.7 }
        ratioCheck("ping-pong p50 ≤ 1.3× raw libevent", [MetricID.pingPongP50], \.ratioLibevent) { $0 <= 1.3 }
        valueCheck("timer scheduling ≤ 1 µs per timer", MetricID.timerSchedule) { $0 <= 1 }
        valueCheck("timer lateness p99 ≤ 2 ms", MetricID.timerP99) { $0 <= 2_000 }
        valueCheck("100,000 timers over 200 ms: all fired ≤ 0.25 s after the first schedule", MetricID.timerAllFired) {
            $0 <= 0.25
        }
        ratioCheck("timers all fired no later than libuv's uv_timer_t", [MetricID.timerAllFired], \.ratioLibuv) {
            $0 <= 1
        }
        ratioCheck("timer churn ≥ 0.5× raw libevent", [MetricID.churn], \.ratioLibevent) { $0 >= 0.5 }
        ratioCheck("iterations ≥ 0.9× raw libevent", [MetricID.iteration0], \.ratioLibevent) { $0 >= 0.9 }
        // Against the smaller of the two: both ratios at most 1.2.
        ratioCheck(
            "memory per loop ≤ 1.2× the smaller of Foundation and raw libevent", [MetricID.memoryLoop],
            { metric in
                guard let foundation = metric.ratioFoundation, let libevent = metric.ratioLibevent else { return nil }
                return max(foundation, libevent)
            }
        ) { $0 <= 1.2 }
        ratioCheck("TCP bulk throughput ≥ 0.9× raw libevent", [MetricID.tcpBulk], \.ratioLibevent) { $0 >= 0.9 }
        ratioCheck("TCP round trips ≥ 0.9× raw libevent", [MetricID.tcpEcho1, MetricID.tcpEcho100], \.ratioLibevent) {
            $0 >= 0.9
        }
        ratioCheck("memory per idle TCP connection ≤ 1.5× raw libevent", [MetricID.tcpIdleMemory], \.ratioLibevent) {
            $0 <= 1.5
        }
        valueCheck("idle loop with no timers: 0 wake-ups/s", MetricID.idleNone) { $0 == 0 }
        valueCheck("idle loop with one 1 Hz timer: 1 wake-up/s", MetricID.idle1Hz) { abs($0 - 1) <= 0.05 }
        return checks
    }

    func targetsText() -> String {
        let checks = targetChecks()
        guard !checks.isEmpty else { return "" }
        var out = ["Targets:"]
        for check in checks {
            let mark = check.met.map { $0 ? "met   " : "MISSED" } ?? "n/a   "
            out.append("  [\(mark)] \(check.target) (\(check.detail))")
        }
        return out.joined(separator: "\n")
    }

    /// The report as JSON, with the target checks.
    func json() throws -> Data {
        struct Document: Encodable {
            let report: Report
            let targets: [TargetCheck]
            func encode(to encoder: Encoder) throws {
                try report.encode(to: encoder)
                var container = encoder.container(keyedBy: Key.self)
                try container.encode(targets, forKey: .targets)
            }
            enum Key: String, CodingKey { case targets }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try encoder.encode(Document(report: self, targets: targetChecks()))
    }

    /// A report written by `json()` (its target checks are recomputed, not read).
    static func decode(_ data: Data) throws -> Report {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try decoder.decode(Report.self, from: data)
    }
}
