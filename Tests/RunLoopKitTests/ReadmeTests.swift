import RunLoopKit
import Testing

// The example of README.md, run. Its ```swift block appears here verbatim (indentation aside);
// scripts/check-doc-snippets.py, run by `make docs`, fails when it is missing here.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// The example, on the calling thread's loop.
private func example() {
    let loop = Loop.current  // on the main thread: Loop.main

    // In .default only: freezes while the loop runs .tracking.
    let poll = LoopTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { _ in
        print("default-mode tick")
    }
    loop.add(poll, forMode: .default)

    // In .common (= .default and .tracking): keeps ticking during tracking.
    let heartbeat = LoopTimer(
        after: .milliseconds(100), repeating: .milliseconds(100),
        tolerance: .milliseconds(10)
    ) { _ in
        print("common-mode tick")
    }
    loop.add(heartbeat, forMode: .common)

    loop.run(mode: .tracking, for: .milliseconds(500))  // only "common-mode tick"
    loop.run(mode: .default, for: .milliseconds(500))  // both; the missed ticks collapse into one

    // A background thread with its own loop, running until stop().
    let worker = LoopThread(name: "worker")
    let done = LoopSource { print("back on the main thread") }  // performed by this loop
    loop.add(done, forMode: .default)
    worker.loop.perform {
        print("working on the worker thread")
        done.signal()  // wakes the main loop
    }
    loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
    worker.stop()  // stops the worker's loop and joins its thread
}

@Suite struct ReadmeTests {
    @Test func theExampleDoesWhatItsCommentsSay() async {
        await awaitFreshThread {
            // Marks the start of each run, to tell which run printed what.
            let loop = Loop.current
            let runs = LoopObserver(activities: .entry) { _, _ in print("run: \(loop.currentMode!.name)") }
            loop.add(runs, forMode: .common)
            example()
            runs.invalidate()
        }
        var ticks: [[String]] = []  // the ticks of each run
        var others: [String] = []
        for event in printed.events {
            if event.hasPrefix("run: ") {
                ticks.append([])
            } else if event.hasSuffix("-mode tick") {
                ticks[ticks.count - 1].append(event)
            } else {
                others.append(event)
            }
        }
        #expect(printed.events.filter { $0.hasPrefix("run: ") } == ["run: tracking", "run: default", "run: default"])
        // .tracking: the common-mode timer only, once per 100 ms (5 times; one more for a run
        // that overslept).
        #expect(ticks[0].allSatisfy { $0 == "common-mode tick" })
        #expect((1...6).contains(ticks[0].count))
        // .default: both. The default-mode timer's 4 or 5 missed ticks come as one callout, then it
        // ticks once per 100 ms: 6 in all (7 for a run that overslept), not about 10.
        let defaultTicks = ticks[1].filter { $0 == "default-mode tick" }.count
        #expect((1...7).contains(defaultTicks))
        #expect(ticks[1].contains("common-mode tick"))
        #expect(others == ["working on the worker thread", "back on the main thread"])
    }
}
