// The overview of the DocC catalog (RunLoopKit.md, and LoopsAndModes.md's first sample), as a
// program's main.swift (and a line printing the result): run on the main thread by
// MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
let timer = LoopTimer(after: .milliseconds(10)) { _ in print("tick") }
loop.add(timer, forMode: .default)
let result = loop.run(mode: .default, for: .seconds(1))
// prints "tick"; result is .finished: the one-shot timer fired
// and left .default empty
print(result)
