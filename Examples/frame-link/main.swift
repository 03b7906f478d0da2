// Timers.md's frame link, as a program's main.swift (and a line printing what its comment states):
// run on the main thread by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
var frames = 0
let link = FrameLink(
    framesPerSecond: 120,
    loop.isolated { link in
        // link.timestamp: this frame's time on the grid;
        // link.targetTimestamp: the next frame's.
        frames += 1
        if frames == 12 { link.invalidate() }
    })
// .common: keeps running while the loop runs .tracking
link.add(to: loop, forMode: .common)
let result = loop.run(mode: .default, for: .seconds(1))
// about 100 ms later: frames is 12, and the run returned .finished
print("frames: \(frames), \(result)")
