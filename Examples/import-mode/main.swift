// LoopsAndModes.md's custom mode in the common set, as a program's main.swift: run on the main
// thread by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
let importing = Loop.Mode("import")
loop.addCommonMode(importing)
let heartbeat = LoopTimer(after: .milliseconds(10)) { _ in
    print("heartbeat")
}
loop.add(heartbeat, forMode: .common)
// Serves the .common items, not the .default-only ones:
loop.run(mode: importing, for: .seconds(1))
