// Top-level code: handlers for a worker loop that capture only Sendable values run there.
import RunLoopKit
import Synchronization

final class Hits: Sendable {
    let count = Mutex(0)
}

let hits = Hits()
let worker = LoopThread(name: "worker")
let timer = LoopTimer(after: .zero, repeating: .milliseconds(1)) { _ in hits.count.withLock { $0 += 1 } }
let observer = LoopObserver(activities: .afterWaiting) { _, _ in hits.count.withLock { $0 += 1 } }
worker.loop.add(timer, forMode: .default)
worker.loop.add(observer, forMode: .default)
let source = LoopSource { hits.count.withLock { $0 += 100 } }
worker.loop.add(source, forMode: .default)
source.signal()
while hits.count.withLock({ $0 }) < 110 {}
timer.invalidate()
observer.invalidate()
source.invalidate()
worker.stop()
