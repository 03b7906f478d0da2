// Visibility.md's metrics, as a program's main.swift: run on the main thread by
// VisibilityProgramTests.
import RunLoopKit

let loop = Loop.current
loop.collectsMetrics = true  // any thread; starts from zero
for _ in 0..<100 { loop.perform {} }
// Runs the blocks; then .default is empty:
loop.run(mode: .default, for: .seconds(1))
let metrics = loop.metrics
print("iterations: \(metrics.iterations)")
print("blocks: \(metrics.callouts[.block] ?? 0)")
print("busy \(metrics.busyTime), asleep \(metrics.waitingTime)")
if let p99 = metrics.queueDelayQuantile(0.99) {
    print("99% of the posted blocks waited less than \(p99)")
}
