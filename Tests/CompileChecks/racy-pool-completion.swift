// A work pool's completion mutates an object that the caller keeps using.
// expect-error: in a '@Sendable' closure
import RunLoopKit

final class Results { var values: [Int] = [] }

func compute(on worker: LoopThread) {
    let results = Results()
    LoopWorkPool.shared.run({ 6 * 7 }, completingOn: worker.loop) { result in
        if case .success(let value) = result { results.values.append(value) }
    }
    results.values.removeAll()
}
compute(on: LoopThread(name: "worker"))
