// SourcesAndPorts.md's message port, as a program's main.swift: run on the main thread by
// MainLoopProgramTests.
import RunLoopKit

enum Command: Sendable { case reload, flush }
let loop = Loop.current
let commands = LoopPort<Command> { command in
    print("handling \(command) on the loop thread")
}
loop.add(commands, forMode: .default)
commands.send(.reload)  // from any thread
commands.send(.flush)
loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
// prints "handling reload on the loop thread",
// then "handling flush on the loop thread"
commands.invalidate()
