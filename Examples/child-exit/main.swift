// WorkOffTheLoop.md's child process, as a program's main.swift: run on the main thread by
// ChildProcessProgramTests.
import RunLoopKit

let loop = Loop.current
let child = try LoopProcess(
    executable: "/bin/sh", arguments: ["-c", "exit 3"],
    standardInput: .null)
child.onExit { process, status in
    print("sh \(process.pid): \(status)")  // exited(3)
}
loop.add(child, forMode: .common)
loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: true)
