// The SVG timeline of a trace (`LoopTracer.svgTimeline(width:)`): drawn without any other tool,
// one lane per loop, its layout in the named constants below.

/// Lays out and draws the SVG timeline.
struct SVGTimeline {
    let records: [LoopTracer.Record]
    let lanes: [LoopTracer.Lane]
    let modes: [Loop.Mode]
    let width: Int

    // Layout, in pixels.
    let left = 190.0
    let right = 28.0
    let top = 70.0
    let laneHeight = 42.0
    let laneGap = 18.0

    /// What a bar stands for, which decides its colour.
    enum Style: Int, CaseIterable {
        case waiting, timer, source, block, observer, descriptor, mainQueue

        init(_ kind: LoopCalloutKind) {
            switch kind {
            case .timer: self = .timer
            case .source: self = .source
            case .descriptor: self = .descriptor
            case .block, .job: self = .block
            case .observer: self = .observer
            case .mainQueue: self = .mainQueue
            }
        }

        var fill: String {
            switch self {
            case .waiting: "#cfd8e3"
            case .timer: "#f28e2b"
            case .source: "#59a14f"
            case .block: "#4e79a7"
            case .observer: "#b07aa1"
            case .descriptor: "#2a9d8f"
            case .mainQueue: "#e15759"
            }
        }

        var label: String {
            switch self {
            case .waiting: "waiting (asleep)"
            case .timer: "timers"
            case .source: "sources, ports"
            case .block: "blocks, jobs"
            case .observer: "observers"
            case .descriptor: "descriptors"
            case .mainQueue: "main queue"
            }
        }

        var name: String {
            switch self {
            case .waiting: "waiting"
            case .timer: "timer"
            case .source: "source"
            case .block: "block/job"
            case .observer: "observer"
            case .descriptor: "descriptor"
            case .mainQueue: "main queue"
            }
        }
    }

    /// A bar, possibly several merged events.
    struct Bar {
        var style: Style
        var depth: Int
        var x0: Double
        var x1: Double
        var count: Int
        var total: Ticks
        var start: Ticks
    }

    func render() -> String {
        let plotWidth = Double(width) - left - right
        let lanesBottom = top + Double(lanes.count) * (laneHeight + laneGap) - laneGap
        let axisY = lanesBottom + 10
        let legendY = axisY + 46
        let height = Int(legendY + 34)

        var t0 = Ticks.max
        var t1 = Ticks.min
        for record in records {
            t0 = min(t0, record.start)
            t1 = max(t1, record.start + record.duration)
        }
        if records.isEmpty {
            t0 = 0
            t1 = 1_000_000
        }
        if t1 <= t0 { t1 = t0 + 1000 }
        let span = Double(t1 - t0)
        func x(_ ticks: Ticks) -> Double { left + Double(ticks - t0) / span * plotWidth }

        var svg: [String] = []
        svg.append(
            ##"<svg xmlns="http://www.w3.org/2000/svg" width="\##(width)" height="\##(height)" viewBox="0 0 \##(width) \##(height)" font-family="Helvetica, Arial, sans-serif">"##
        )
        svg.append(##"<rect width="100%" height="100%" fill="#ffffff"/>"##)
        let callouts = records.lazy.filter { $0.type == .callout }.count
        let waits = records.lazy.filter { $0.type == .waiting }.count
        svg.append(
            ##"<text x="\##(number(left))" y="28" font-size="17" font-weight="bold" fill="#1f2933">Run loop timeline</text>"##
        )
        let loopsText = lanes.count == 1 ? "1 loop" : "\(lanes.count) loops"
        svg.append(
            ##"<text x="\##(number(left))" y="48" font-size="12" fill="#52606d">\##(loopsText) · \##(humanDuration(t1 - t0)) · \##(callouts) callouts · \##(waits) waits</text>"##
        )

        // Grid and axis ticks.
        let step = SVGTimeline.niceStep(span / max(1, plotWidth / 110))
        var ticks: [Ticks] = []
        var tick: Ticks = 0
        while Double(tick) <= span + 0.5 {
            ticks.append(tick)
            tick += step
        }
        for tick in ticks {
            let tx = number(x(t0 + tick))
            svg.append(
                ##"<line x1="\##(tx)" y1="\##(number(top - 8))" x2="\##(tx)" y2="\##(number(axisY))" stroke="#e4e7eb" stroke-width="1"/>"##
            )
        }

        // Lanes.
        for (position, index) in LoopTracer.displayOrder(lanes).enumerated() {
            let lane = lanes[index]
            let y = top + Double(position) * (laneHeight + laneGap)
            svg.append(
                ##"<rect x="\##(number(left))" y="\##(number(y))" width="\##(number(plotWidth))" height="\##(number(laneHeight))" rx="3" fill="#f5f7fa" fill-opacity="0.85" stroke="#d9dee5"/>"##
            )
            let title = lane.isMain ? "\(lane.threadName) (main)" : lane.threadName
            svg.append(
                ##"<text x="\##(number(left - 12))" y="\##(number(y + 18))" font-size="13" font-weight="bold" text-anchor="end" fill="#1f2933">\##(xmlEscaped(title))</text>"##
            )
            svg.append(
                ##"<text x="\##(number(left - 12))" y="\##(number(y + 34))" font-size="11" text-anchor="end" fill="#7b8794">tid \##(lane.threadID)</text>"##
            )
            for bar in bars(lane: index, x: x) {
                svg.append(draw(bar, laneTop: y))
            }
            // Runs starting and ending; each run's mode above the lane.
            for record in records where Int(record.lane) == index && record.type == .phase {
                let activity = Loop.Activity(rawValue: 1 << UInt32(record.detail))
                guard activity == .entry || activity == .exit else { continue }
                let mode = record.mode == .max ? "" : modes[Int(record.mode)].name
                let mx = x(record.start)
                let mark = activity == .entry ? "run entry (\(mode))" : "run exit (\(mode))"
                svg.append(
                    ##"<line x1="\##(number(mx))" y1="\##(number(y - 4))" x2="\##(number(mx))" y2="\##(number(y + laneHeight + 4))" stroke="#323f4b" stroke-width="1.2" stroke-dasharray="3,2"><title>\##(xmlEscaped(mark))</title></line>"##
                )
                if activity == .entry, !mode.isEmpty, mx < left + plotWidth - 40 {
                    svg.append(
                        ##"<text x="\##(number(mx + 4))" y="\##(number(y - 4))" font-size="10" fill="#52606d">.\##(xmlEscaped(mode))</text>"##
                    )
                }
            }
        }

        // Axis.
        svg.append(
            ##"<line x1="\##(number(left))" y1="\##(number(axisY))" x2="\##(number(left + plotWidth))" y2="\##(number(axisY))" stroke="#7b8794" stroke-width="1"/>"##
        )
        for tick in ticks {
            let tx = number(x(t0 + tick))
            svg.append(
                ##"<line x1="\##(tx)" y1="\##(number(axisY))" x2="\##(tx)" y2="\##(number(axisY + 5))" stroke="#7b8794" stroke-width="1"/>"##
            )
            svg.append(
                ##"<text x="\##(tx)" y="\##(number(axisY + 19))" font-size="11" text-anchor="middle" fill="#52606d">\##(SVGTimeline.label(tick, step: step))</text>"##
            )
        }
        svg.append(
            ##"<text x="\##(number(left - 12))" y="\##(number(axisY + 19))" font-size="11" text-anchor="end" fill="#7b8794">time</text>"##
        )

        // Legend.
        var lx = left
        var styles = Style.allCases.filter { $0 != .mainQueue }
        if records.contains(where: { $0.type == .callout && $0.detail == UInt8(LoopCalloutKind.mainQueue.rawValue) }) {
            styles.append(.mainQueue)
        }
        for style in styles {
            let swatchY = style == .waiting ? legendY - 8 : legendY - 11
            let swatchHeight = style == .waiting ? 6.0 : 12.0
            svg.append(
                ##"<rect x="\##(number(lx))" y="\##(number(swatchY))" width="14" height="\##(number(swatchHeight))" rx="2" fill="\##(style.fill)"/>"##
            )
            svg.append(
                ##"<text x="\##(number(lx + 20))" y="\##(number(legendY))" font-size="12" fill="#323f4b">\##(style.label)</text>"##
            )
            lx += 20 + Double(style.label.count) * 6.6 + 22
        }
        svg.append(
            ##"<line x1="\##(number(lx))" y1="\##(number(legendY - 12))" x2="\##(number(lx))" y2="\##(number(legendY + 2))" stroke="#323f4b" stroke-width="1.2" stroke-dasharray="3,2"/>"##
        )
        svg.append(
            ##"<text x="\##(number(lx + 8))" y="\##(number(legendY))" font-size="12" fill="#323f4b">run entry / exit</text>"##
        )
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    /// The bars of one lane, neighbours closer than a pixel merged.
    private func bars(lane: Int, x: (Ticks) -> Double) -> [Bar] {
        let mine = records.filter { Int($0.lane) == lane && $0.type != .phase }
            .sorted { ($0.start, $0.depth) < ($1.start, $1.depth) }
        var open: [Int: Int] = [:]  // style/depth key -> index in `bars`
        var bars: [Bar] = []
        for record in mine {
            let style: Style =
                record.type == .waiting ? .waiting : Style(LoopCalloutKind(rawValue: Int(record.detail)) ?? .block)
            let depth = record.type == .waiting ? 0 : Int(record.depth)
            let x0 = x(record.start)
            var x1 = x(record.start + record.duration)
            if style != .waiting { x1 = max(x1, x0 + 1.5) }
            let key = style.rawValue * 1000 + depth
            if let index = open[key], x0 <= bars[index].x1 + 0.6 {
                bars[index].x1 = max(bars[index].x1, x1)
                bars[index].count += 1
                bars[index].total += record.duration
                continue
            }
            open[key] = bars.count
            bars.append(
                Bar(style: style, depth: depth, x0: x0, x1: x1, count: 1, total: record.duration, start: record.start))
        }
        // Waits first, then callouts from the outermost in (inner ones on top); at one depth,
        // observers (which surround every other callout) under the rest.
        func layer(_ bar: Bar) -> Int {
            bar.style == .waiting ? -1 : bar.depth * 2 + (bar.style == .observer ? 0 : 1)
        }
        return bars.sorted { layer($0) < layer($1) }
    }

    private func draw(_ bar: Bar, laneTop y: Double) -> String {
        let width = number(max(bar.x1 - bar.x0, 0.5))
        let what = bar.count == 1 ? bar.style.name : "\(bar.count) × \(bar.style.name)"
        let tip = "\(what): \(humanDuration(bar.total))"
        if bar.style == .waiting {
            return
                ##"<rect x="\##(number(bar.x0))" y="\##(number(y + laneHeight * 0.38))" width="\##(width)" height="\##(number(laneHeight * 0.24))" fill="\##(bar.style.fill)"><title>\##(xmlEscaped(tip))</title></rect>"##
        }
        let inset = 4 + Double(min(bar.depth, 3)) * 5
        return
            ##"<rect x="\##(number(bar.x0))" y="\##(number(y + inset))" width="\##(width)" height="\##(number(laneHeight - 2 * inset))" fill="\##(bar.style.fill)" stroke="#ffffff" stroke-opacity="0.6" stroke-width="\##(bar.depth > 0 ? "0.8" : "0")"><title>\##(xmlEscaped(tip))</title></rect>"##
    }

    /// A tick step of 1, 2 or 5 × 10^k nanoseconds, at least `raw`.
    static func niceStep(_ raw: Double) -> Ticks {
        var magnitude: Ticks = 1
        while Double(magnitude) * 10 <= raw { magnitude *= 10 }
        for factor: Ticks in [1, 2, 5, 10] where Double(magnitude * factor) >= raw {
            return magnitude * factor
        }
        return magnitude * 10
    }

    /// An axis label: `0`, `20 ms`, `250 µs`, `2 s`. Steps are 1, 2 or 5 × 10^k of the unit picked,
    /// so every tick is a whole number of it.
    static func label(_ tick: Ticks, step: Ticks) -> String {
        if tick == 0 { return "0" }
        let (unit, scale): (String, Ticks) =
            step >= 1_000_000_000
            ? ("s", 1_000_000_000) : step >= 1_000_000 ? ("ms", 1_000_000) : step >= 1000 ? ("µs", 1000) : ("ns", 1)
        return "\(tick / scale) \(unit)"
    }
}
