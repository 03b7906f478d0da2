// A block performed on a worker loop mutates an object the caller keeps using.
// expect-error: in a '@Sendable' closure
import RunLoopKit

final class Queue { var items: [Int] = [] }

func post(to worker: LoopThread) {
    let queue = Queue()
    worker.loop.perform { queue.items.append(1) }
    queue.items.append(2)
}
post(to: LoopThread(name: "worker"))
