// Timers.md's two timers served in one wake-up, as a program's main.swift: run on the main thread
// by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
let a = LoopTimer(
    after: .milliseconds(50), tolerance: .milliseconds(30)
) { _ in print("a") }
let b = LoopTimer(after: .milliseconds(70)) { _ in print("b") }
loop.add(a, forMode: .default)
loop.add(b, forMode: .default)
loop.run(mode: .default, for: .seconds(1))
// one wake-up at about 70 ms: "a", then "b"
