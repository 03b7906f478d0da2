// Visibility.md's instrument of slow callouts, and its use, as a program's main.swift: run on the
// main thread by VisibilityProgramTests.
import Glibc
import RunLoopKit

final class SlowCalloutLog: LoopInstrument, @unchecked Sendable {
    // Touched only on the loop's thread, where every hook runs.
    private var started: ContinuousClock.Instant?

    func loopWillCallOut(
        _ loop: Loop, _ kind: LoopCalloutKind,
        at time: ContinuousClock.Instant
    ) {
        started = time
    }

    func loopDidCallOut(
        _ loop: Loop, _ kind: LoopCalloutKind,
        at time: ContinuousClock.Instant
    ) {
        if let started, time - started > .milliseconds(10) {
            print("slow \(kind) callout")
        }
    }
}

let loop = Loop.current
let log = SlowCalloutLog()
loop.attach(log)  // from the loop's next iteration
let slow = LoopTimer(after: .milliseconds(5)) { _ in usleep(20_000) }
loop.add(slow, forMode: .default)
loop.run(mode: .default, for: .seconds(1))
loop.detach(log)
// prints "slow timer callout"
