// Timers.md's missed fires under `.burst`, as a program's main.swift (and a line printing what its
// comment states): run on the main thread by MainLoopProgramTests.
import Glibc
import RunLoopKit

let loop = Loop.current
var fireDates: [ContinuousClock.Instant] = []
let sampler = LoopTimer(
    after: .milliseconds(20), repeating: .milliseconds(20), missedFirePolicy: .burst,
    loop.isolated { timer in
        fireDates.append(timer.fireDate)
        if fireDates.count == 5 { loop.stop() }
    })
loop.add(sampler, forMode: .default)
// Busy elsewhere: the fires due at 20, 40, 60, 80 and 100 ms are missed.
usleep(110_000)
// One callout for each of them, back to back, each with the date it is for:
loop.run(mode: .default, for: .seconds(1))
sampler.invalidate()
// fireDates are 20 ms apart: 20, 40, 60, 80 and 100 ms after the timer was made
print(zip(fireDates.dropFirst(), fireDates).map { Int(($0 - $1) / .milliseconds(1)) })
