// Waiting for a background job's result (LoopsAndModes.md, "Loop threads"), as a program's
// main.swift: run on the main thread by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
let worker = LoopThread(name: "worker")
let done = LoopSource { print("the job is done") }
loop.add(done, forMode: .default)
worker.loop.perform {
    print("the job runs on the worker thread")
    done.signal()
}
loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: true)  // .handledSource
worker.shutdown()
