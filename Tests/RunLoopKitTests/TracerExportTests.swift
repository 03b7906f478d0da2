import Foundation
import FoundationXML
import Testing

@testable import RunLoopKit

/// The tracer's exports with awkward input: names that need escaping, and callouts too short
/// and too many to draw one by one.
@Suite struct TracerExportTests {
    @Test func modeAndThreadNamesWithControlCharactersStayValidJSON() throws {
        let awkward = "tab\there \"quoted\" back\\slash bell\u{7} nul\u{0} unit\u{1F} line\nend"
        let tracer = LoopTracer(capacity: 1024)
        onFreshThread {
            let loop = Loop.current
            loop.attach(tracer)
            let mode = Loop.Mode(awkward)
            loop.add(LoopTimer(after: .zero) { _ in }, forMode: mode)
            loop.run(mode: mode, for: .seconds(5))
            loop.detach(tracer)
        }
        let json = tracer.chromeTraceJSON()
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8))
        let events = try #require((parsed as? [String: Any])?["traceEvents"] as? [[String: Any]])
        let modes = events.compactMap { ($0["args"] as? [String: Any])?["mode"] as? String }
        #expect(modes.contains(awkward))
        #expect(json.contains(#"\u0007"#))
        #expect(json.contains(#"\u001f"#))
    }

    @Test func callOutsCloserThanAPixelAreDrawnAsOneBarWithTheirCount() throws {
        let tracer = LoopTracer(capacity: 8192)
        onFreshThread {
            let loop = Loop.current
            loop.attach(tracer)
            // 500 empty blocks, run in one pass.
            for _ in 0..<500 { loop.perform {} }
            loop.run(mode: .default, for: .seconds(5))
            loop.detach(tracer)
        }
        let blocks = tracer.events.filter { $0.kind == .callout(.block) }.count
        #expect(blocks == 500)
        let svg = tracer.svgTimeline(width: 400)
        // Each bar's tooltip says how many callouts it stands for.
        let counts = svg.matches(of: #/<title>(\d+) × block/job: /#).compactMap { Int($0.output.1) }
        #expect(!counts.isEmpty)
        #expect(counts.reduce(0, +) <= blocks)
        #expect(counts.contains { $0 > 1 })
        let parser = XMLParser(data: Data(svg.utf8))
        #expect(parser.parse(), "not well-formed XML: \(String(describing: parser.parserError))")
    }
}
