// LoopsAndModes.md's nested run (a modal mode served from inside a timer's callout), as a program's
// main.swift: run on the main thread by MainLoopProgramTests.
import RunLoopKit

let loop = Loop.current
let modal = Loop.Mode("modal")
var answered = false
let answer = LoopTimer(after: .milliseconds(30), loop.isolated { _ in answered = true })
loop.add(answer, forMode: modal)
let ask = LoopTimer(
    after: .milliseconds(10),
    loop.isolated { _ in
        while !answered {
            // Serves only the modal mode:
            loop.run(mode: modal, for: .seconds(1))
        }
        print("answered; back in \(loop.currentMode!.name)")
    })
loop.add(ask, forMode: .default)
loop.run(mode: .default, for: .seconds(1))
// prints "answered; back in default"
print(loop.run(mode: .default, for: .seconds(1)))  // finished: both timers fired
