// Concurrency.md's port whose handler is `loop.isolated`, as a program's main.swift (and a line
// printing what its comment states): run on the main thread by ConcurrencyProgramTests.
import RunLoopKit

let loop = Loop.current
var lines: [String] = []
let port = LoopPort<String>(loop.isolated { line in lines.append(line) })
loop.add(port, forMode: .default)
port.send("first")  // from any thread
port.send("second")
while lines.count < 2 {
    loop.run(
        mode: .default, for: .seconds(1), returnAfterSourceHandled: true)
}
// lines is ["first", "second"]
port.invalidate()
print(lines)
