// Two timers on two loops share one non-Sendable object.
// expect-error: risks causing data races
import RunLoopKit

final class Tally { var count = 0 }

func start() {
    let tally = Tally()
    let first = LoopThread(name: "first")
    let second = LoopThread(name: "second")
    first.loop.add(LoopTimer(after: .zero, repeating: .milliseconds(1)) { _ in tally.count += 1 }, forMode: .default)
    second.loop.add(LoopTimer(after: .zero, repeating: .milliseconds(1)) { _ in tally.count += 1 }, forMode: .default)
}
start()
