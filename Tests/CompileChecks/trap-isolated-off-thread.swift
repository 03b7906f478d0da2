// A handler made with Loop.isolated(_:) on another thread than the loop's: stopped before it
// could run anywhere.
// expect-trap: Loop.isolated(_:) called on another thread than the loop's
import RunLoopKit

let worker = LoopThread(name: "worker")
var hits = 0
let timer = LoopTimer(after: .zero, worker.loop.isolated { _ in hits += 1 })
worker.loop.add(timer, forMode: .default)
