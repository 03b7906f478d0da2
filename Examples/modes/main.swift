// LoopsAndModes.md's modes sample (a .default timer frozen while the loop runs .tracking), as a
// program's main.swift: run on the main thread by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
let frozen = LoopTimer(
    after: .milliseconds(10), repeating: .milliseconds(10)
) { _ in
    print("default-mode tick")
}
loop.add(frozen, forMode: .default)
let ticking = LoopTimer(
    after: .milliseconds(10), repeating: .milliseconds(10)
) { _ in
    print("common-mode tick")
}
loop.add(ticking, forMode: .common)
loop.run(mode: .tracking, for: .milliseconds(100))
// only "common-mode tick"
