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

/// CPU time (user and system) this process has used so far.
func cpuTime() -> Duration {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func duration(_ time: timeval) -> Duration { .seconds(time.tv_sec) + .microseconds(time.tv_usec) }
    return duration(usage.ru_utime) + duration(usage.ru_stime)
}

/// Runs `body` and reports its result with the CPU time and wall time it took, in milliseconds.
func measured(_ label: String, _ body: () -> Loop.RunResult) {
    let (cpu, start) = (cpuTime(), ContinuousClock.now)
    let result = body()
    let wall = ContinuousClock.now - start
    report(
        "\(label): \(result) cpu-ms: \(Int((cpuTime() - cpu) / .milliseconds(1))) wall-ms: \(Int(wall / .milliseconds(1)))"
    )
}

if CommandLine.arguments.dropFirst().first == "--idle" {
    // A program that never uses the main queue: Loop.main empties like any other loop.
    measured("nothing in default") { loop.run(mode: .default, for: .seconds(1)) }
    let timer = LoopTimer(after: .milliseconds(10)) { _ in report("tick") }
    loop.add(timer, forMode: .default)
    measured("one-shot timer") { loop.run(mode: .default, for: .seconds(1)) }
    // Once the main queue has had work, it keeps the common modes running, as in CoreFoundation:
    // the run waits (asleep) for more until its timeout.
    DispatchQueue.main.async { report("main queue block") }
    measured("main queue only") { loop.run(mode: .default, for: .seconds(1)) }
    // A custom mode outside the common set, with main-queue work waiting: asleep too.
    let custom = Loop.Mode("custom")
    loop.add(LoopSource {}, forMode: custom)
    DispatchQueue.main.async { report("waited for a common mode") }
    measured("custom mode, main queue waiting") { loop.run(mode: custom, for: .milliseconds(500)) }
    measured("tracking") { loop.run(mode: .tracking, for: .milliseconds(500), returnAfterSourceHandled: true) }
    exit(0)
}

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

// 5. Once the main queue has had work, a common mode is never finished, even with nothing in it.
report("empty default: \(loop.run(mode: .default, for: .milliseconds(50)))")
exit(0)
