import Dispatch
import Foundation
import RunLoopKit

/// `runloop-bench --post-floor [REPETITIONS [BLOCKS]]`: the typical-closure post rows (workload
/// 1) against the least any Swift code can do to hand the same closures to another thread:
/// producers append them to one array under a pthread mutex (`Locked`: libuv's idiom, a locked
/// queue; `Synchronization.Mutex` is invisible to ThreadSanitizer), and a thread that never sleeps
/// swaps the array out, runs the closures and releases them. No wake-up, no loop: what is left is
/// the closure itself (its context allocated by the producer and freed by the consumer, the two
/// captured objects retained and released on two threads) and one lock. Next to it, RunLoopKit
/// with the same closure, with the same closure capturing its two objects unretained (the context
/// is still allocated and freed, but no reference count changes), and libuv's malloc'd item; all
/// in the same repetitions, alternating; the figures are medians with their range.
enum PostFloor {
    static let flag = "--post-floor"

    static func main(_ arguments: [String]) -> Int32 {
        let repetitions = arguments.count >= 1 ? Int(arguments[0]) : 5
        let blocks = arguments.count >= 2 ? Int(arguments[1]) : BenchmarkSize.full.postBlocks
        guard arguments.count <= 2, let repetitions, let blocks, repetitions > 0, blocks > 0 else {
            print("usage: runloop-bench \(flag) [REPETITIONS [BLOCKS]]")
            return 2
        }
        print("typical-closure posts, \(blocks) blocks, \(repetitions) repetitions (blocks/s: median, min–max)")
        let rows: [(name: String, run: (Int) -> Double?)] = [
            ("bare locked queue", { floor(producers: $0, blocks: blocks) }),
            ("RunLoopKit", { rate(.runLoopKit, .typical, producers: $0, blocks: blocks) }),
            ("  unretained", { rate(.runLoopKit, .typicalUnretained, producers: $0, blocks: blocks) }),
            ("libuv", { rate(.libuv, .typical, producers: $0, blocks: blocks) }),
        ]
        for producers in [1, 4] {
            var figures = [[Double]](repeating: [], count: rows.count)
            for _ in 0..<repetitions {
                for (index, row) in rows.enumerated() {
                    if let rate = row.run(producers) { figures[index].append(rate) }
                }
            }
            let libuv = Stats.median(figures[rows.count - 1])
            print("\(producers) producer\(producers == 1 ? "" : "s"):")
            for (row, values) in zip(rows, figures) where !values.isEmpty {
                let median = Stats.median(values)
                let name = row.name.padding(toLength: 18, withPad: " ", startingAt: 0)
                print(
                    "  \(name) \(format(median)) (\(format(values.min()!))–\(format(values.max()!)))  "
                        + String(format: "%.2f× libuv", median / libuv))
            }
        }
        return 0
    }

    private static func rate(
        _ implementation: Implementation, _ capture: PostCapture, producers: Int, blocks: Int
    ) -> Double? {
        let outcome = implementation.contender.postThroughput(
            producers: producers, blocks: blocks, capture: capture, pinnedTo: nil, timeout: 60)
        guard case .success(let rate) = outcome else { return nil }
        return rate
    }

    private static func format(_ rate: Double) -> String { String(format: "%.2f M", rate / 1e6) }

    /// Blocks per second through the bare queue, from the first producer's start to the last
    /// block run.
    private static func floor(producers: Int, blocks: Int) -> Double {
        let queue = Locked<[@Sendable () -> Void]>([])
        let counter = PostCounter(target: blocks)
        let line = StartLine(parties: producers + 2)
        let consumer = NativeThread {
            line.wait()
            var batch: [@Sendable () -> Void] = []
            while counter.done.wait(timeout: .now()) != .success {
                queue.withLock { swap(&$0, &batch) }
                if batch.isEmpty {
                    sched_yield()
                    continue
                }
                for block in batch { block() }
                batch.removeAll(keepingCapacity: true)
            }
        }
        let threads = (0..<producers).map { index in
            let share = blocks / producers + (index == 0 ? blocks % producers : 0)
            return NativeThread {
                line.wait()
                counter.started(monotonicSeconds())
                postTypical(share, producer: index, counter: counter) { block in
                    queue.withLock { $0.append(block) }
                }
            }
        }
        line.wait()
        for thread in threads { _ = thread.join(timeout: 60) }
        _ = consumer.join(timeout: 60)
        return counter.blocksPerSecond
    }
}
