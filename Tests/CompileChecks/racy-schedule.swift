// A scheduled block mutates an object the caller keeps using.
// expect-error: in a '@Sendable' closure
import RunLoopKit

final class Budget { var left = 10 }

func plan(on worker: LoopThread) {
    let budget = Budget()
    worker.loop.schedule(after: .milliseconds(5)) { budget.left -= 1 }
    budget.left -= 1
}
plan(on: LoopThread(name: "worker"))
