// An observer on a worker loop counts into a top-level variable the main thread reads.
// expect-error: main actor-isolated var 'passes' can not be mutated from a nonisolated context
import RunLoopKit

var passes = 0
let worker = LoopThread(name: "worker")
worker.loop.add(LoopObserver(activities: .beforeWaiting) { _, _ in passes += 1 }, forMode: .common)
print(passes)
