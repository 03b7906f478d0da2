// A LoopBound touched on another thread than its loop's.
// expect-trap: LoopBound<Array<Int>>.value touched on another thread than its loop's
import RunLoopKit

let worker = LoopThread(name: "worker")
let numbers = LoopBound([Int](), on: worker.loop)
worker.loop.add(LoopTimer(after: .zero) { _ in numbers.value.append(1) }, forMode: .default)
numbers.value.append(2)
