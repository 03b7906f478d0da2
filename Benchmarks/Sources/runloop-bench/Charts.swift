import Foundation

// SVG charts drawn by hand (no plotting dependency): RunLoopKit's ratios, and the latency
// distributions of the ping-pong and timer workloads.

enum Charts {
    static let colors: [Implementation: String] = [
        .runLoopKit: "#1f6fb4", .foundation: "#d9822b", .libevent: "#7b5ea7", .libuv: "#c0392b", .glib: "#4d6b5a",
    ]
    static let font = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""

    /// Writes `ratios.svg`, `pingpong-latency.svg` and `timer-lateness.svg` (those the report has
    /// data for) into `directory`; returns the paths written.
    static func write(_ report: Report, to directory: String) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var written: [String] = []
        func save(_ svg: String, _ name: String) throws {
            let path = (directory as NSString).appendingPathComponent(name)
            try svg.write(toFile: path, atomically: true, encoding: .utf8)
            written.append(path)
        }
        if let svg = ratioChart(report) { try save(svg, "ratios.svg") }
        for curve in report.curves {
            guard let svg = latencyChart(curve, report) else { continue }
            try save(svg, "\(curve.id).svg")
        }
        return written
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    static func subtitle(_ report: Report) -> String {
        "\(report.size) run, \(report.repetitions) repetition\(report.repetitions == 1 ? "" : "s"), medians · \(report.machine.cpu), "
            + "\(report.machine.cores) cores, Linux \(report.machine.kernel) · \(report.machine.build) build · "
            + "\(report.date.prefix(10))"
    }

    static func number(_ value: Double) -> String { String(format: "%.1f", value) }

    // MARK: Ratios

    /// Horizontal bars on a log axis from the 1.0 line to each ratio; per row, the half where
    /// RunLoopKit is better is tinted green.
    static func ratioChart(_ report: Report) -> String? {
        let peers = Implementation.peers
        let rows = report.metrics.filter { metric in peers.contains { metric.ratio(to: $0) != nil } }
        guard !rows.isEmpty else { return nil }
        let ratios = rows.flatMap { metric in peers.compactMap { metric.ratio(to: $0) } }.filter { $0 > 0 }
        // A margin of a factor 4 leaves room for the value printed past the end of the longest bars.
        let low = floor(log10(min(0.1, (ratios.min() ?? 1) / 4)))
        let high = ceil(log10(max(10, (ratios.max() ?? 1) * 4)))

        let width = 980.0
        let labelWidth = 300.0
        let plotLeft = labelWidth + 10
        let plotRight = width - 45
        let top = 104.0
        let barPitch = 15.0
        let rowHeight = max(46, 10 + barPitch * Double(peers.count))
        let height = top + rowHeight * Double(rows.count) + 60
        func x(_ ratio: Double) -> Double {
            let clamped = min(max(ratio, pow(10, low)), pow(10, high))
            return plotLeft + (log10(clamped) - low) / (high - low) * (plotRight - plotLeft)
        }

        var svg = header(width: width, height: height)
        svg += text(
            20, 30, "RunLoopKit ÷ each other implementation, per figure (log scale)", size: 18, weight: "bold")
        svg += text(20, 52, subtitle(report), size: 12, fill: "#555")
        svg += text(
            20, 72,
            "Bars run from the 1.0 line (equal) to the ratio; the green half of each row is where RunLoopKit is better.",
            size: 12, fill: "#555")
        // Legend.
        for (slot, peer) in peers.reversed().enumerated() {
            let left = plotRight - 110 * Double(slot + 1)
            svg += rect(left, 80, 12, 12, fill: colors[peer]!)
            svg += text(left + 16, 91, "vs \(peer.rawValue)", size: 12)
        }

        let one = x(1)
        for (index, metric) in rows.enumerated() {
            let rowTop = top + Double(index) * rowHeight
            let betterRight = metric.better == .higherIsBetter
            let tintX = betterRight ? one : plotLeft
            let tintWidth = betterRight ? plotRight - one : one - plotLeft
            svg += rect(tintX, rowTop + 2, tintWidth, rowHeight - 4, fill: "#e4f3df")
            svg += text(
                labelWidth, rowTop + 20, metric.label, size: 13, anchor: "end")
            svg += text(
                labelWidth, rowTop + 36, "\(metric.unit), \(metric.better.rawValue) is better", size: 11,
                anchor: "end", fill: "#666")
            for (slot, implementation) in peers.enumerated() {
                let ratio = metric.ratio(to: implementation)
                let barTop = rowTop + 5 + Double(slot) * barPitch
                guard let ratio, ratio > 0 else {
                    svg += text(one + 6, barTop + 11, "n/a", size: 10, fill: "#888")
                    continue
                }
                let end = x(ratio)
                svg += rect(min(one, end), barTop, max(abs(end - one), 1), barPitch - 2, fill: colors[implementation]!)
                let labelX = end >= one ? end + 5 : end - 5
                svg += text(
                    labelX, barTop + 11, Formatting.ratio(ratio), size: 10, anchor: end >= one ? "start" : "end")
            }
        }
        // Axis: decades, and the 1.0 line on top.
        let axisY = top + rowHeight * Double(rows.count) + 6
        for decade in Int(low)...Int(high) {
            let position = x(pow(10, Double(decade)))
            svg += line(position, top, position, axisY, stroke: "#ccc", width: 0.5)
            svg += text(position, axisY + 16, decadeLabel(decade) + "×", size: 12, anchor: "middle")
        }
        svg += line(one, top - 4, one, axisY, stroke: "#000", width: 1.5)
        svg += text(one, axisY + 34, "1.0 = equal", size: 12, anchor: "middle", weight: "bold")
        return svg + "</svg>\n"
    }

    // MARK: Latency distributions

    /// Latency by percentile (x: log scale of 1 / (1 − q), y: log scale of microseconds), one
    /// curve per implementation.
    static func latencyChart(_ curve: CurveResult, _ report: Report) -> String? {
        let series = Implementation.allCases.compactMap { implementation in
            curve.series[implementation.rawValue].map { (implementation, $0) }
        }
        guard !series.isEmpty else { return nil }
        let floorValue = 0.1
        let values = series.flatMap { $0.1 }.filter(\.isFinite).map { max($0, floorValue) }
        guard let smallest = values.min(), let largest = values.max() else { return nil }
        let low = floor(log10(smallest))
        let high = max(ceil(log10(largest)), low + 1)

        let width = 1080.0
        let height = 560.0
        let plotLeft = 90.0
        let plotRight = width - 320
        let plotTop = 90.0
        let plotBottom = height - 70
        let maxPosition = Stats.curvePosition(curve.quantiles.last ?? 0.9999)
        func x(_ quantile: Double) -> Double {
            plotLeft + Stats.curvePosition(quantile) / maxPosition * (plotRight - plotLeft)
        }
        func y(_ value: Double) -> Double {
            let clamped = max(value, floorValue)
            return plotBottom - (log10(clamped) - low) / (high - low) * (plotBottom - plotTop)
        }

        var svg = header(width: width, height: height)
        svg += text(20, 30, "\(curve.title): by percentile", size: 18, weight: "bold")
        svg += text(20, 52, subtitle(report), size: 12, fill: "#555")
        svg += text(
            20, 70,
            "Each curve is the median over repetitions of each percentile; values below 0.1 µs are drawn at 0.1 µs.",
            size: 12, fill: "#555")

        // Grid: decades of microseconds, and the percentiles 0, 90, 99, 99.9, 99.99.
        for decade in Int(low)...Int(high) {
            let position = y(pow(10, Double(decade)))
            svg += line(plotLeft, position, plotRight, position, stroke: "#ddd")
            svg += text(plotLeft - 8, position + 4, decadeLabel(decade), size: 12, anchor: "end")
        }
        for (quantile, label) in [(0.0, "0 %"), (0.9, "90 %"), (0.99, "99 %"), (0.999, "99.9 %"), (0.9999, "99.99 %")]
        where Stats.curvePosition(quantile) <= maxPosition + 1e-9 {
            let position = x(quantile)
            svg += line(position, plotTop, position, plotBottom, stroke: "#ddd")
            svg += text(position, plotBottom + 18, label, size: 12, anchor: "middle")
        }
        // The median.
        let median = x(0.5)
        svg += line(median, plotTop, median, plotBottom, stroke: "#bbb", extra: "stroke-dasharray=\"4 3\"")
        svg += text(median, plotTop - 6, "p50", size: 11, anchor: "middle", fill: "#777")
        svg += rect(
            plotLeft, plotTop, plotRight - plotLeft, plotBottom - plotTop, fill: "none", extra: "stroke=\"#888\"")
        svg += text((plotLeft + plotRight) / 2, height - 22, "percentile", size: 13, anchor: "middle")
        let middle = number((plotTop + plotBottom) / 2)
        svg += "<text x=\"22\" y=\"\(middle)\" font-size=\"13\" \(font) text-anchor=\"middle\" "
        svg += "transform=\"rotate(-90 22 \(middle))\">microseconds (log scale)</text>\n"

        for (implementation, points) in series {
            let path = zip(curve.quantiles, points).filter { $0.1.isFinite }.map {
                "\(number(x($0.0))),\(number(y($0.1)))"
            }
            guard !path.isEmpty else { continue }
            svg += "<polyline points=\"\(path.joined(separator: " "))\" fill=\"none\" "
            svg += "stroke=\"\(colors[implementation]!)\" stroke-width=\"2.2\" stroke-linejoin=\"round\"/>\n"
        }
        // Legend with p50, p99 and the last point, right of the plot.
        let legendX = plotRight + 24
        for (index, (implementation, points)) in series.enumerated() {
            let p50 = points[nearest(curve.quantiles, 0.5)]
            let p99 = points[nearest(curve.quantiles, 0.99)]
            let tail = points.last ?? .nan
            let legendY = plotTop + 10 + Double(index) * 62
            svg += line(legendX, legendY - 4, legendX + 24, legendY - 4, stroke: colors[implementation]!, width: 3)
            svg += text(legendX + 32, legendY, implementation.rawValue, size: 13, weight: "bold")
            svg += text(
                legendX + 32, legendY + 18,
                "p50 \(Formatting.significant(p50)) µs · p99 \(Formatting.significant(p99)) µs", size: 12)
            svg += text(legendX + 32, legendY + 35, "p99.99 \(Formatting.significant(tail)) µs", size: 12)
        }
        if let detail = report.parameters[curve.id] {
            svg += text(legendX, plotTop + 10 + Double(series.count) * 62 + 10, detail, size: 12, fill: "#555")
        }
        return svg + "</svg>\n"
    }

    /// 10^decade written plainly: 0.01, 0.1, 1, 10, 1,000.
    static func decadeLabel(_ decade: Int) -> String {
        decade >= 0
            ? Formatting.grouped(Int(pow(10, Double(decade)))) : "0." + String(repeating: "0", count: -decade - 1) + "1"
    }

    private static func nearest(_ quantiles: [Double], _ quantile: Double) -> Int {
        quantiles.indices.min { abs(quantiles[$0] - quantile) < abs(quantiles[$1] - quantile) } ?? 0
    }

    // MARK: SVG pieces

    static func header(width: Double, height: Double) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
            + "viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
            + "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
    }

    static func rect(
        _ x: Double, _ y: Double, _ width: Double, _ height: Double, fill: String, extra: String = ""
    ) -> String {
        "<rect x=\"\(number(x))\" y=\"\(number(y))\" width=\"\(number(width))\" height=\"\(number(height))\" "
            + "fill=\"\(fill)\"\(extra.isEmpty ? "" : " " + extra)/>\n"
    }

    static func line(
        _ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, stroke: String, width: Double = 1, extra: String = ""
    ) -> String {
        "<line x1=\"\(number(x1))\" y1=\"\(number(y1))\" x2=\"\(number(x2))\" y2=\"\(number(y2))\" "
            + "stroke=\"\(stroke)\" stroke-width=\"\(number(width))\"\(extra.isEmpty ? "" : " " + extra)/>\n"
    }

    static func text(
        _ x: Double, _ y: Double, _ content: String, size: Int, anchor: String = "start", weight: String = "normal",
        fill: String = "#222"
    ) -> String {
        "<text x=\"\(number(x))\" y=\"\(number(y))\" font-size=\"\(size)\" \(font) text-anchor=\"\(anchor)\" "
            + "font-weight=\"\(weight)\" fill=\"\(fill)\">\(escape(content))</text>\n"
    }
}
