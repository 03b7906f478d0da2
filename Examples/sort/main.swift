// WorkOffTheLoop.md, "Talking to a child over its standard streams": sort over connections, as a
// program's main.swift (and a line printing the result): run on the main thread by
// ChildProcessProgramTests.
import RunLoopKit

let loop = Loop.current
let child = try LoopProcess(
    executable: "/usr/bin/sort", standardInput: .connection,
    standardOutput: .connection, standardError: .inherit)
child.standardOutput!.onRead { _, buffer in
    while let line = buffer.readLine() { print(String(decoding: line, as: UTF8.self)) }
}
child.standardInput!.enqueue("pear\napple\n".utf8)
child.standardInput!.shutdownOutput()  // sort sees the end of its input
loop.add(child, forMode: .common)
let result = loop.run(mode: .default, for: .seconds(10))
// prints "apple", then "pear"; result is .finished: once sort has exited and
// its streams have closed, nothing is left in .default
print(result)
