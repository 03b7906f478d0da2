// A small program for the tests: main-queue behaviour needs the real main thread, which a test
// process does not give its tests. Each line it prints is checked by MainQueueTests.
import Dispatch
import Glibc
import RunLoopKit
import RunLoopKitMainExecutor
import Synchronization

@inline(never)
func report(_ line: String) {
    Swift.print(line)
    fflush(nil)
}

let loop = Loop.main

if CommandLine.arguments.dropFirst().first == "--main-executor" {
    // Loop.main as the main executor: @MainActor jobs are queued on the loop itself.
    LoopMainExecutor.install()
    Task { @MainActor in
        report(
            "main executor job on main loop: \(Loop.current === Loop.main) mode: \(Loop.main.currentMode?.name ?? "none")"
        )
        Loop.main.stop()
    }
    loop.run()
    report("main executor run returned")
    exit(0)
}

report("current is main: \(Loop.current === loop)")

// 1. A common mode (here .default) drains DispatchQueue.main.
let ranIn = Mutex<String>("")
DispatchQueue.main.async {
    ranIn.withLock { $0 = Loop.main.currentMode?.name ?? "none" }
}
let first = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
report("default drained: \(ranIn.withLock { $0 }) result: \(first)")

// 2. A custom mode that is not common does not; the block waits for a common mode.
let custom = Loop.Mode("custom")
loop.add(LoopSource {}, forMode: custom)
let customRan = Mutex(false)
DispatchQueue.main.async { customRan.withLock { $0 = true } }
let second = loop.run(mode: custom, for: .milliseconds(200))
report("custom drained: \(customRan.withLock { $0 }) result: \(second)")
loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
report("after default: \(customRan.withLock { $0 })")

// 3. A custom mode added to the common set does drain it.
let joined = Loop.Mode("joined")
loop.addCommonMode(joined)
let joinedRan = Mutex(false)
DispatchQueue.main.async { joinedRan.withLock { $0 = true } }
loop.run(mode: joined, for: .seconds(5), returnAfterSourceHandled: true)
report("joined drained: \(joinedRan.withLock { $0 })")

// 4. @MainActor jobs run on Loop.main.
Task { @MainActor in
    report("main actor task on main loop: \(Loop.current === Loop.main) mode: \(Loop.main.currentMode?.name ?? "none")")
    Loop.main.stop()
}
report("main actor run: \(loop.run(mode: .default, for: .seconds(5)))")

// 5. On the main thread a common mode is never finished, even with nothing in it.
report("empty default: \(loop.run(mode: .default, for: .milliseconds(50)))")
exit(0)
