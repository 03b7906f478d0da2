// Concurrency.md's actor on a loop, awaited at top level, as a program's main.swift (and a line
// printing what its comment states): run on the main thread by ConcurrencyProgramTests.
import RunLoopKit

actor Connection {
    let loop: Loop
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        loop.asUnownedSerialExecutor()
    }
    init(loop: Loop) { self.loop = loop }
    func handle(_ bytes: [UInt8]) -> Bool {
        Loop.current === loop  // true: on the loop's thread
    }
}

let io = LoopThread(name: "io")
let connection = Connection(loop: io.loop)
let onTheLoop = await connection.handle([1, 2, 3])  // true
print(onTheLoop)
