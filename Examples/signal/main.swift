// SourcesAndPorts.md's signal source, as a program's main.swift: run on the main thread by
// MainLoopProgramTests.
import Glibc
import RunLoopKit

let loop = Loop.current
let hangUp = LoopSignalSource(signal: SIGHUP) { signal in
    print("signal \(signal): reloading")
}
loop.add(hangUp, forMode: .default)
raise(SIGHUP)
loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
// prints "signal 1: reloading"
hangUp.invalidate()  // the action the process had before is restored
