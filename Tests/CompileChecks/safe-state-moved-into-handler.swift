// State made for one handler and touched nowhere else is moved into it: no lock, no check.
import RunLoopKit
import Synchronization

final class Tally { var count = 0 }
let done = Atomic<Bool>(false)

func start(on worker: LoopThread) {
    let tally = Tally()
    let timer = LoopTimer(after: .zero, repeating: .milliseconds(1)) { timer in
        tally.count += 1
        if tally.count == 5 {
            timer.invalidate()
            done.store(true, ordering: .releasing)
        }
    }
    worker.loop.add(timer, forMode: .default)
}

let worker = LoopThread(name: "worker")
start(on: worker)
while !done.load(ordering: .acquiring) {}
worker.stop()
