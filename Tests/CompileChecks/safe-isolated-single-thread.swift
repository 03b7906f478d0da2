// The run-loop idiom on the loop's own thread: a local variable set by handlers and read after
// the run, through Loop.isolated(_:), in a function and in top-level code.
import RunLoopKit

func countFires() -> Int {
    let loop = Loop.current
    var fires = 0
    let timer = LoopTimer(
        after: .milliseconds(1), repeating: .milliseconds(1),
        loop.isolated { timer in
            fires += 1
            if fires == 3 { timer.invalidate() }
        })
    loop.add(timer, forMode: .default)
    while timer.isValid { loop.run(mode: .default, for: .seconds(1)) }
    return fires
}
precondition(countFires() == 3)

let loop = Loop.current
var fired = false
var passes = 0
loop.add(LoopTimer(after: .milliseconds(1), loop.isolated { _ in fired = true }), forMode: .default)
loop.add(LoopObserver(activities: .beforeTimers, loop.isolated { _, _ in passes += 1 }), forMode: .default)
loop.run(mode: .default, for: .seconds(1))
precondition(fired && passes > 0)
