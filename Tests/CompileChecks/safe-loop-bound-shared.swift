// Two handlers of one worker loop share state through a LoopBound.
import RunLoopKit
import Synchronization

let done = Atomic<Int>(0)
let worker = LoopThread(name: "worker")
let ticks = LoopBound(0, on: worker.loop)
let timer = LoopTimer(after: .zero, repeating: .milliseconds(1)) { timer in
    ticks.value += 1
    if ticks.value == 5 { timer.invalidate() }
}
let observer = LoopObserver(activities: .beforeWaiting) { observer, _ in
    if ticks.value >= 5 {
        done.store(ticks.value, ordering: .releasing)
        observer.invalidate()
    }
}
worker.loop.add(timer, forMode: .default)
worker.loop.add(observer, forMode: .default)
while done.load(ordering: .acquiring) == 0 {}
precondition(done.load(ordering: .acquiring) == 5)
worker.stop()
