// Visibility.md's tracer, as a program's main.swift: run on the main thread by
// VisibilityProgramTests.
import RunLoopKit

let tracer = LoopTracer(capacity: 20_000)
let loop = Loop.current
loop.attach(tracer)  // one lane per loop, labelled with its thread
loop.add(LoopTimer(after: .milliseconds(5)) { _ in }, forMode: .default)
loop.run(mode: .default, for: .seconds(1))
loop.detach(tracer)
let json = tracer.chromeTraceJSON()  // save as trace.json, open in Perfetto
// Save as trace.svg, open in a browser:
let svg = tracer.svgTimeline(width: 1200)
print("\(tracer.count) events")
print("\(json.utf8.count) bytes of JSON, \(svg.utf8.count) of SVG")
