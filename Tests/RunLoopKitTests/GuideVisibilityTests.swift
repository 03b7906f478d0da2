import Glibc
import RunLoopKit
import Testing

// Code samples of the DocC article Visibility.md
// (Sources/RunLoopKit/RunLoopKit.docc/Visibility.md), run: these blocks appear here verbatim
// (indentation aside); DocumentationTests.swift holds its others; the test's own code stands where
// a block says `// ...`. Tests of the same calls that the article no longer shows stay beside them.
// scripts/check-doc-snippets.py, run by `make docs`, fails when a block of the article is in none
// of the files its table names for it.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// A stand-in for a server's log.
private func log(_ text: String) { print(text) }

private func metrics() -> LoopMetrics {
    let worker = LoopThread(name: "worker")
    let loop = worker.loop
    loop.collectsMetrics = true  // any thread; counts from the next iteration
    // ... later, from any thread:
    // Counting starts at the worker's next iteration: the block that wakes it up may not count.
    let ran = Recorder<Int>()
    loop.perform { ran.append(0) }
    _ = waitUntil { ran.count == 1 }
    for value in 1...100 { loop.perform { ran.append(value) } }
    loop.add(LoopTimer(after: .milliseconds(5)) { _ in ran.append(-1) }, forMode: .default)
    _ = waitUntil { ran.count == 102 }
    let metrics = loop.metrics
    print("iterations: \(metrics.iterations)")
    print("busy \(metrics.busyTime), asleep \(metrics.waitingTime)")
    print("timer callouts: \(metrics.callouts[.timer] ?? 0), blocks: \(metrics.callouts[.block] ?? 0)")
    if let p99 = metrics.queueDelayQuantile(0.99) {
        print("99% of posted blocks waited less than \(p99) in the queue")
    }
    worker.stop()
    return metrics
}

private func hangMonitor() {
    let loop = Loop.current
    let monitor = LoopHangMonitor(loop: loop, threshold: .milliseconds(50)) { report in
        log("hang: \(report)")
        // e.g. "62.4 ms without sleeping in mode default; 61.9 ms of it after afterWaiting;
        //       slowest callout: a timer, 61.8 ms"
    }
    // ...
    loop.add(LoopTimer(after: .milliseconds(5)) { _ in usleep(80_000) }, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    monitor.invalidate()
}

private func tracer() -> (json: String, svg: String) {
    let worker = LoopThread(name: "traced-worker")
    let tracer = LoopTracer(capacity: 20_000)
    Loop.current.attach(tracer)
    worker.loop.attach(tracer)  // one lane per loop, labelled with its thread
    // ... run ...
    // A timer here; a block on the worker, posted once the worker has started its next iteration
    // (an attached tracer sees a loop from then).
    Loop.current.add(LoopTimer(after: .milliseconds(5)) { _ in }, forMode: .default)
    Loop.current.run(mode: .default, for: .seconds(1))
    let ran = Recorder<Bool>()
    worker.loop.perform { ran.append(true) }
    _ = waitUntil { ran.count == 1 }
    worker.loop.perform { ran.append(true) }
    _ = waitUntil { ran.count == 2 }
    Loop.current.detach(tracer)
    worker.loop.detach(tracer)
    let json = tracer.chromeTraceJSON()  // save as trace.json, open in Perfetto
    let svg = tracer.svgTimeline(width: 1200)  // save as trace.svg, open in a browser
    worker.stop()
    return (json, svg)
}

/// The chapter's code does what the chapter says. Serialized: the snippets share `printed`.
@Suite(.serialized) struct GuideVisibilityTests {
    init() { printed.removeAll() }

    @Test func metricsCountTheCalloutsAndTheQueueDelay() async {
        let snapshot = await awaitFreshThread { metrics() }
        let blocks = snapshot.callouts[.block] ?? 0
        #expect(blocks == 100 || blocks == 101)
        #expect(snapshot.callouts[.timer] == 1)
        #expect(printed.count == 4)
        #expect(printed.events.first == "iterations: \(snapshot.iterations)")
        #expect(printed.events.dropFirst(2).first == "timer callouts: 1, blocks: \(blocks)")
        #expect(printed.events.last?.hasPrefix("99% of posted blocks waited less than ") == true)
    }

    @Test func theHangMonitorLogsAStall() async {
        await awaitFreshThread { hangMonitor() }
        #expect(printed.count == 1)
        #expect(printed.events.first?.hasPrefix("hang: ") == true)
        #expect(printed.events.first?.contains("slowest callout: a timer") == true)
    }

    @Test func aTracerDrawsOneLanePerLoop() async {
        let (json, svg) = await awaitFreshThread { tracer() }
        #expect(json.contains("\"timer\""))
        #expect(json.contains("\"block\""))
        #expect(json.contains("traced-worker"))
        #expect(svg.hasPrefix("<svg") || svg.contains("<svg"))
        #expect(svg.contains("traced-worker"))
    }
}
