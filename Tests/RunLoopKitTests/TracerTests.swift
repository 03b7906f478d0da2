import Foundation
import FoundationXML
import Testing

@testable import RunLoopKit

/// `LoopTracer`: what it records from two loops, its ring buffer, and its Chrome-trace JSON and SVG
/// exports.
@Suite struct TracerTests {
    /// Waits (bounded) until the tracer has seen `thread`'s loop, i.e. the loop picked it up.
    static func waitUntilTraced(_ tracer: LoopTracer, thread name: String) -> Bool {
        let limit = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < limit {
            if tracer.events.contains(where: { $0.threadName == name }) { return true }
            sched_yield()
        }
        return false
    }

    /// A loop thread named "trace-main" with 3 timer fires and a `beforeWaiting` observer; each fire
    /// posts a block to a `LoopThread` named "trace-worker". Both loops are traced.
    static func traceTwoLoops(capacity: Int = 4096) -> (tracer: LoopTracer, mainThread: Int) {
        let tracer = LoopTracer(capacity: capacity)
        let worker = LoopThread(name: "trace-worker")
        worker.loop.attach(tracer)
        let seen = waitUntilTraced(tracer, thread: "trace-worker")
        #expect(seen, "the worker loop never picked up the tracer")
        let mainThread: Int = onFreshThread {
            Platform.setCurrentThreadName("trace-main")  // a new thread inherits its creator's name
            let loop = Loop.current
            loop.attach(tracer)
            var fires = 0
            let timer = LoopTimer(after: .milliseconds(10), repeating: .milliseconds(10)) { timer in
                fires += 1
                worker.loop.perform { usleep(5_000) }
                if fires == 3 { timer.invalidate() }
            }
            loop.add(timer, forMode: .default)
            let observer = LoopObserver(activities: .beforeWaiting) { _, _ in }
            loop.add(observer, forMode: .default)
            loop.add(LoopSource {}, forMode: .default)
            loop.run(mode: .default, for: .milliseconds(60))
            loop.detach(tracer)
            observer.invalidate()
            return LoopTracer.currentThread().id ?? -1
        }
        worker.stop()  // runs the blocks already posted, then joins
        return (tracer, mainThread)
    }

    @Test func recordsCalloutsWaitsAndPhasesOfTwoLoops() {
        let (tracer, mainThread) = Self.traceTwoLoops()
        let events = tracer.events
        let main = events.filter { $0.threadID == mainThread }
        let worker = events.filter { $0.threadName == "trace-worker" }
        #expect(main.allSatisfy { $0.threadName == "trace-main" })
        #expect(main.filter { $0.kind == .callout(.timer) }.count == 3)
        #expect(main.contains { $0.kind == .callout(.observer) })
        #expect(main.contains { $0.kind == .waiting && $0.duration > .zero })
        let phases: [Loop.Activity] = [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit]
        for phase in phases {
            #expect(main.contains { $0.kind == .phase(phase) && $0.mode == .default }, "no \(phase) phase")
        }
        // The 3 posted blocks sleep 5 ms each; `LoopThread.stop()` queues a short one of its own, well
        // under that even with a sanitizer's slowdown.
        let blocks = worker.filter { $0.kind == .callout(.block) && $0.duration >= .milliseconds(5) }
        #expect(blocks.count == 3)
        #expect(blocks.allSatisfy { $0.queueDelay != nil })
        #expect(worker.contains { $0.kind == .waiting })
        #expect(tracer.overwritten == 0)
        #expect(tracer.count == events.count)
    }

    @Test func chromeTraceParsesAsJSONAndListsTheExpectedEvents() throws {
        let (tracer, mainThread) = Self.traceTwoLoops()
        let json = tracer.chromeTraceJSON()
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8))
        let root = try #require(object as? [String: Any])
        let events = try #require(root["traceEvents"] as? [[String: Any]])
        #expect(events.count == tracer.count + 1 + 2 * 2)  // + process name + 2 × (thread name, sort index)

        let pid = Int(getpid())
        for event in events {
            #expect(event["pid"] as? Int == pid)
            #expect(event["tid"] is Int)
            #expect(event["name"] is String)
            let phase = try #require(event["ph"] as? String)
            #expect(["M", "X", "i"].contains(phase))
            if phase == "X" {
                #expect((event["ts"] as? Double ?? -1) >= 0)
                #expect((event["dur"] as? Double ?? -1) >= 0)
                #expect(["callout", "wait"].contains(event["cat"] as? String ?? ""))
            }
            if phase == "i" {
                #expect(event["cat"] as? String == "phase")
                #expect(event["s"] as? String == "t")
                #expect(event["ts"] is Double)
            }
        }

        func named(_ name: String, _ phase: String) -> [[String: Any]] {
            events.filter { $0["name"] as? String == name && $0["ph"] as? String == phase }
        }
        let threadNames = named("thread_name", "M").compactMap { ($0["args"] as? [String: Any])?["name"] as? String }
        #expect(Set(threadNames) == ["trace-main", "trace-worker"])
        let workerThread =
            named("thread_name", "M").first {
                ($0["args"] as? [String: Any])?["name"] as? String == "trace-worker"
            }?["tid"] as? Int

        let timers = named("timer", "X")
        #expect(timers.count == 3)
        #expect(timers.allSatisfy { $0["tid"] as? Int == mainThread && $0["cat"] as? String == "callout" })
        #expect(timers.allSatisfy { ($0["args"] as? [String: Any])?["mode"] as? String == "default" })
        let blocks = named("block", "X").filter { ($0["dur"] as? Double ?? 0) >= 5_000 }  // µs: the 3 posted blocks
        #expect(blocks.count == 3)
        #expect(blocks.allSatisfy { $0["tid"] as? Int == workerThread })
        #expect(blocks.allSatisfy { ($0["args"] as? [String: Any])?["queueDelayUs"] is Double })
        #expect(!named("observer", "X").isEmpty)
        let waits = named("waiting", "X")
        #expect(waits.contains { $0["tid"] as? Int == mainThread })
        #expect(waits.contains { $0["tid"] as? Int == workerThread })
        #expect(waits.allSatisfy { $0["cat"] as? String == "wait" })
        for phase in ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit"] {
            #expect(named(phase, "i").contains { $0["tid"] as? Int == mainThread }, "no \(phase) instant")
        }
    }

    @Test func svgTimelineIsWellFormedWithALanePerLoop() throws {
        let (tracer, _) = Self.traceTwoLoops()
        let svg = tracer.svgTimeline(width: 1000)
        #expect(svg.hasPrefix("<svg"))
        #expect(svg.contains(#"width="1000""#))
        let parser = XMLParser(data: Data(svg.utf8))
        #expect(parser.parse(), "not well-formed XML: \(String(describing: parser.parserError))")
        #expect(svg.contains(">trace-main<"))
        #expect(svg.contains(">trace-worker<"))
        for label in ["waiting (asleep)", "timers", "sources, ports", "blocks, jobs", "observers", "descriptors"] {
            #expect(svg.contains(">\(label)<"), "legend lacks \(label)")
        }
        #expect(svg.contains(">0<"))
        #expect(svg.contains(" ms<"))  // axis labels
        #expect(svg.contains("#f28e2b"))  // a timer bar
        #expect(svg.contains("#4e79a7"))  // a block bar
    }

    @Test func theRingKeepsTheNewestEvents() {
        let tracer = LoopTracer(capacity: 16)
        let (firstIsEntry, lastIsExit) = onFreshThread {
            let loop = Loop.current
            loop.attach(tracer)
            for _ in 0..<50 { loop.perform {} }
            loop.run(mode: .default, for: .zero)
            loop.detach(tracer)
            let events = tracer.events
            return (events.first?.kind == .phase(.entry), events.last?.kind == .phase(.exit))
        }
        #expect(tracer.count == 16)
        #expect(tracer.overwritten > 0)
        #expect(!firstIsEntry)  // the oldest events were overwritten
        #expect(lastIsExit)
        let starts = tracer.events.map(\.start)
        #expect(starts == starts.sorted(), "blocks are recorded in order")
        tracer.clear()
        #expect(tracer.count == 0)
        #expect(tracer.events.isEmpty)
    }

    @Test func nestedCalloutsAreRecordedWithTheirDepth() throws {
        let tracer = LoopTracer(capacity: 1024)
        onFreshThread {
            let loop = Loop.current
            loop.attach(tracer)
            let modal = Loop.Mode("modal")
            loop.perform(inModes: [modal]) {}
            let outer = LoopTimer(after: .milliseconds(1)) { _ in
                loop.run(mode: modal, for: .zero)
            }
            loop.add(outer, forMode: .default)
            loop.run(mode: .default, for: .milliseconds(50))
            loop.detach(tracer)
        }
        let events = tracer.events
        let inner = try #require(events.first { $0.kind == .callout(.block) })
        let outer = try #require(events.first { $0.kind == .callout(.timer) })
        #expect(inner.depth == 1)
        #expect(inner.mode == Loop.Mode("modal"))
        #expect(outer.depth == 0)
        #expect(inner.start >= outer.start)
        #expect(inner.start + inner.duration <= outer.start + outer.duration)
    }

    @Test func anEmptyTracerExportsValidDocuments() throws {
        let tracer = LoopTracer(capacity: 8)
        let object = try JSONSerialization.jsonObject(with: Data(tracer.chromeTraceJSON().utf8))
        let events = try #require((object as? [String: Any])?["traceEvents"] as? [[String: Any]])
        #expect(events.count == 1)  // the process name
        #expect(events.first?["ph"] as? String == "M")
        let svg = tracer.svgTimeline(width: 10)
        #expect(XMLParser(data: Data(svg.utf8)).parse())
        #expect(svg.contains(#"width="480""#))  // the narrowest timeline
    }

    @Test func detachedTracersRecordNothing() {
        let tracer = LoopTracer(capacity: 64)
        let counts = onFreshThread {
            let loop = Loop.current
            loop.attach(tracer)
            loop.perform {}
            loop.run(mode: .default, for: .zero)
            let attached = tracer.count
            loop.detach(tracer)
            loop.perform {}
            loop.run(mode: .default, for: .zero)
            return (attached, tracer.count)
        }
        #expect(counts.0 > 0)
        #expect(counts.1 == counts.0)
    }
}
