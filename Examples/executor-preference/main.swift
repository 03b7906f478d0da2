// Concurrency.md's task that prefers a loop, and `submit`, as a program's main.swift (and a line
// printing what its comment states): run on the main thread by ConcurrencyProgramTests.
import RunLoopKit

let io = LoopThread(name: "io")
let here = await Task(executorPreference: io.loop) {
    Loop.current === io.loop  // true
}.value
// Computed on the loop's thread:
let answer = try await io.loop.submit { 6 * 7 }
print(here, answer)
