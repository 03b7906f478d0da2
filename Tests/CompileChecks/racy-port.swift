// A port's handler and the sending thread share a non-Sendable dictionary holder.
// expect-error: risks causing data races
import RunLoopKit

final class Totals { var byName: [String: Int] = [:] }

func start(on worker: LoopThread) {
    let totals = Totals()
    let port = LoopPort<String> { name in totals.byName[name, default: 0] += 1 }
    worker.loop.add(port, forMode: .default)
    port.send("a")
    totals.byName["b"] = 1
}
start(on: LoopThread(name: "worker"))
