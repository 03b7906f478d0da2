// SourcesAndPorts.md's blocks performed on a worker, as a program's main.swift: run on the main
// thread by MainLoopProgramTests.
import RunLoopKit

let worker = LoopThread(name: "worker")
worker.loop.perform {
    print("runs on the worker thread")
}
worker.loop.perform(inModes: [.default]) {
    print("runs only when the worker runs .default")
}
worker.stop()  // the blocks already posted run first
