// docs/Guide.md, "The main dispatch queue on `Loop.main`": the program as the Guide shows it, run
// by MainLoopProgramTests. Loop.main.run() does not return: the program waits until it is ended.
import Dispatch
import RunLoopKit

// main.swift
DispatchQueue.main.async { print("on the main loop") }
Task { @MainActor in print("main actor, on the main loop") }
Loop.main.run()
