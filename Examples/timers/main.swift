// Timers.md's first sample, as a program's main.swift (and a line printing `ticks`): run on the
// main thread by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
var ticks = 0
let every = LoopTimer(
    after: .milliseconds(10), repeating: .milliseconds(10),
    loop.isolated { timer in
        ticks += 1
        if ticks == 3 { timer.invalidate() }  // from inside its own handler
    })
loop.add(every, forMode: .common)
let once = LoopTimer(after: .milliseconds(20)) { _ in
    print("one-shot, then invalid")
}
loop.add(once, forMode: .default)
loop.run(mode: .default, for: .seconds(1))
// ticks is 3; .default became empty, so the run returned .finished
print("ticks: \(ticks)")
