// WorkOffTheLoop.md's supervisor (a failing child restarted by a timer, waiting longer each time),
// as a program's main.swift: run on the main thread by ChildProcessProgramTests.
import RunLoopKit

let loop = Loop.current
let failing = ["-c", "exit 1"]  // a child that fails at once
let starts = LoopBound(0, on: loop)  // the loop thread's count, for the handlers below
func start() {
    let child: LoopProcess
    do {
        child = try LoopProcess(executable: "/bin/sh", arguments: failing)
    } catch {
        return  // error.systemError: ENOENT, EACCES, …
    }
    starts.value += 1
    child.onExit { _, status in
        guard status != .exited(0), starts.value < 3 else { return }
        // 10 ms, 20 ms, …
        let delay = Duration.milliseconds(10) * (1 << (starts.value - 1))
        loop.add(LoopTimer(after: delay) { _ in start() }, forMode: .common)
    }
    loop.add(child, forMode: .common)
}
start()
loop.run(mode: .default, for: .seconds(10))
// starts.value is 3: the child failed twice and was restarted twice;
// then .default became empty
print("starts: \(starts.value)")
