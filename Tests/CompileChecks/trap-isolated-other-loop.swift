// A handler made with Loop.isolated(_:) for the main loop, its timer added to a worker loop: the
// handler stops the process before its body runs.
// expect-trap: a handler made with Loop.isolated(_:) was called on another thread than its loop's
import RunLoopKit

let main = Loop.current
var hits = 0
let timer = LoopTimer(after: .zero, main.isolated { _ in hits += 1 })
let worker = LoopThread(name: "worker")
worker.loop.add(timer, forMode: .default)
while true {
    main.run(mode: .default, for: .milliseconds(10))
    if hits > 0 { print("ran off its loop") }
}
