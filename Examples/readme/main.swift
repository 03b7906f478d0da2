// README.md's example, as a program's main.swift: run on the main thread by MainLoopProgramTests.
import RunLoopKit

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
