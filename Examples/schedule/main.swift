// Timers.md's scheduled block, cancelled, as a program's main.swift (and a line printing what its
// comment states): run on the main thread by MainLoopProgramTests.
import RunLoopKit

let worker = LoopThread(name: "retries")
let retry = worker.loop.schedule(after: .seconds(2)) {
    print("reconnecting")
}
// ... the connection came back first:
retry.cancel()
worker.stop()
// retry.isCancelled is true: the block never runs
print("cancelled: \(retry.isCancelled)")
