// LoopsAndModes.md's observer of a run's entry and exit, as a program's main.swift: run on the main
// thread by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
let observer = LoopObserver(activities: [.entry, .exit]) { _, activity in
    print("\(activity) in \(loop.currentMode?.name ?? "no mode")")
}
loop.add(observer, forMode: .common)
loop.add(LoopTimer(after: .milliseconds(5)) { _ in }, forMode: .default)
loop.run(mode: .default, for: .seconds(1))
// prints "entry in default", then "exit in default"
