// Concurrency.md, "The main queue and the main actor": the program as the article shows it, run by
// MainLoopProgramTests. Loop.main.run() does not return: the program waits until it is ended.
import Dispatch
import RunLoopKit

// main.swift
DispatchQueue.main.async { print("on the main loop") }
Task { @MainActor in print("main actor, on the main loop") }
Loop.main.run()
