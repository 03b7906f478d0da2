// Visibility.md's hang monitor, as a program's main.swift: run on the main thread by
// VisibilityProgramTests.
import Glibc
import RunLoopKit

let loop = Loop.current
let monitor = LoopHangMonitor(
    loop: loop, threshold: .milliseconds(50)
) { report in
    print("hang: \(report)")
}
let stall = LoopTimer(after: .milliseconds(5)) { _ in usleep(80_000) }
loop.add(stall, forMode: .default)
loop.run(mode: .default, for: .seconds(1))
// prints "hang: 80.2 ms without sleeping in mode default; …;
// slowest callout: a timer, 80.1 ms"
monitor.invalidate()
