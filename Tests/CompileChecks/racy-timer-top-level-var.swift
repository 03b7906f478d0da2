// A timer on a worker loop mutates a top-level variable that the main thread mutates too.
// expect-error: main actor-isolated var 'hits' can not be mutated from a nonisolated context
import RunLoopKit

var hits = 0
let worker = LoopThread(name: "worker")
let timer = LoopTimer(after: .zero, repeating: .milliseconds(1)) { _ in hits += 1 }
worker.loop.add(timer, forMode: .default)
hits += 1
