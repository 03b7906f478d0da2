import CRawLibuv
import CRawPeer
import Dispatch
import Foundation
import RunLoopKit
import Synchronization

/// `runloop-bench --post-floor [REPETITIONS [BLOCKS]]`: the typical-closure post rows (workload
/// 1) with what separates their costs, all in the same repetitions, alternating; the figures are
/// medians with their range:
/// - a bare locked queue: producers append the same closures to one array under a pthread mutex
///   (`Locked`: libuv's idiom; `Synchronization.Mutex` is invisible to ThreadSanitizer), and a
///   thread that never sleeps swaps the array out and moves each closure out to run it (a copy
///   would retain its context). No wake-up, no loop: the closure and one lock;
/// - RunLoopKit with the typical closure;
/// - the same closure capturing its two objects unretained: its context is still allocated on
///   the producer and freed on the loop thread, but no reference count changes;
/// - libuv's malloc'd item with the same values, each of its two objects given a reference count
///   in its first cache line, changed as Swift changes the captured objects' counts (added on the
///   producer before the post, dropped on the loop thread after the work, with the runtime's
///   compare-and-swap loop): what those counts cost without Swift;
/// - libuv's malloc'd item as in workload 1.
///
/// `--placement apart` or `together` (after the counts) pins every row's threads as in workload
/// 1: on two cores the scheduler's own placement changes from one repetition to the next, and
/// with it a row's figure by up to four times. `--row NAME` runs one row alone and `--producers N`
/// one producer count, so that a profiler sees only that row's threads (callgrind's
/// `--separate-threads=yes` then gives the loop thread's and the producers' costs apart).
enum PostFloor {
    static let flag = "--post-floor"

    /// The rows, by the name `--row` takes.
    static let rowNames = ["queue", "RunLoopKit", "unretained", "counted", "libuv"]

    static func main(_ arguments: [String]) -> Int32 {
        var counts = arguments
        var placement = PostPlacement.scheduler
        var onlyRow: Int?
        var producerCounts = [1, 4]
        // The options after the counts, in any order.
        while counts.count >= 2, counts[counts.count - 2].hasPrefix("--") {
            let (option, value) = (counts[counts.count - 2], counts[counts.count - 1])
            counts.removeLast(2)
            switch option {
            case "--placement":
                guard let chosen = PostPlacement(rawValue: value) else { return usage() }
                placement = chosen
            case "--row":
                guard let index = rowNames.firstIndex(of: value) else { return usage() }
                onlyRow = index
            case "--producers":
                guard let count = Int(value), count > 0 else { return usage() }
                producerCounts = [count]
            default:
                return usage()
            }
        }
        let repetitions = counts.count >= 1 ? Int(counts[0]) : 5
        let blocks = counts.count >= 2 ? Int(counts[1]) : BenchmarkSize.full.postBlocks
        guard counts.count <= 2, let repetitions, let blocks, repetitions > 0, blocks > 0 else { return usage() }
        guard case .success(let processors) = placement.processors() else {
            print("runloop-bench: no processors to pin to for --placement \(placement.rawValue)")
            return 1
        }
        print(
            "typical-closure posts, \(blocks) blocks, \(repetitions) repetitions, placement \(placement.rawValue)"
                + " (blocks/s: median, min–max)")
        let allRows: [(name: String, run: (Int) -> Double?)] = [
            ("bare locked queue", { floor(producers: $0, blocks: blocks, pinnedTo: processors) }),
            ("RunLoopKit", { rate(.runLoopKit, .typical, producers: $0, blocks: blocks, pinnedTo: processors) }),
            (
                "  unretained",
                { rate(.runLoopKit, .typicalUnretained, producers: $0, blocks: blocks, pinnedTo: processors) }
            ),
            ("libuv, counted", { countedLibuvRate(producers: $0, blocks: blocks, pinnedTo: processors) }),
            ("libuv", { rate(.libuv, .typical, producers: $0, blocks: blocks, pinnedTo: processors) }),
        ]
        // One row alone (for a profiler): its figures, without the ratio to libuv.
        let rows = onlyRow.map { [allRows[$0]] } ?? allRows
        let reference = onlyRow == nil ? rows.count - 1 : nil
        var failed = false
        for producers in producerCounts {
            var figures = [[Double]](repeating: [], count: rows.count)
            for _ in 0..<repetitions {
                for (index, row) in rows.enumerated() {
                    if let rate = row.run(producers) { figures[index].append(rate) }
                }
            }
            for (row, values) in zip(rows, figures) where values.count < repetitions {
                print(
                    "runloop-bench: \(row.name.trimmingCharacters(in: .whitespaces)), \(producers) producers: "
                        + "\(repetitions - values.count) of \(repetitions) repetitions failed")
                failed = true
            }
            if let reference, figures[reference].isEmpty { continue }
            let libuv = reference.map { Stats.median(figures[$0]) }
            print("\(producers) producer\(producers == 1 ? "" : "s"):")
            for (row, values) in zip(rows, figures) where !values.isEmpty {
                let median = Stats.median(values)
                let name = row.name.padding(toLength: 18, withPad: " ", startingAt: 0)
                print(
                    "  \(name) \(format(median)) (\(format(values.min()!))–\(format(values.max()!)))"
                        + (libuv.map { String(format: "  %.2f× libuv", median / $0) } ?? ""))
            }
        }
        return failed ? 1 : 0
    }

    private static func usage() -> Int32 {
        print(
            "usage: runloop-bench \(flag) [REPETITIONS [BLOCKS]] [--placement scheduler|apart|together]"
                + " [--row \(rowNames.joined(separator: "|"))] [--producers N]")
        return 2
    }

    private static func rate(
        _ implementation: Implementation, _ capture: PostCapture, producers: Int, blocks: Int,
        pinnedTo processors: PostProcessors?
    ) -> Double? {
        let outcome = implementation.contender.postThroughput(
            producers: producers, blocks: blocks, capture: capture, pinnedTo: processors, timeout: 60)
        guard case .success(let rate) = outcome else { return nil }
        return rate
    }

    /// libuv's typical item, its two objects' reference counts changed as a Swift closure's
    /// captures are: the cost of those counts alone, without Swift. Nil (a failed repetition) if
    /// the counts did not come back to zero.
    private static func countedLibuvRate(producers: Int, blocks: Int, pinnedTo processors: PostProcessors?)
        -> Double?
    {
        let result = raw_peer_post_throughput(
            LibuvContender.peer, Int32(producers), Int64(blocks), 2, 60, processors?.loop ?? -1,
            processors?.producers ?? -1)
        guard result.ok != 0, result.seconds > 0 else { return nil }
        return Double(result.count) / result.seconds
    }

    private static func format(_ rate: Double) -> String { String(format: "%.2f M", rate / 1e6) }

    /// Blocks per second through the bare queue, from the first producer's start to the last
    /// block run.
    static func floor(producers: Int, blocks: Int, pinnedTo processors: PostProcessors?) -> Double? {
        // Optional, so that the consumer can move each closure out and leave nil behind.
        let queue = Locked<[(@Sendable () -> Void)?]>([])
        let counter = PostCounter(target: blocks)
        let line = StartLine(parties: producers + 2)
        let unpinned = Atomic<Int>(0)
        let consumer = NativeThread {
            if let processors, !pinCurrentThread(to: processors.loop) { unpinned.add(1, ordering: .relaxed) }
            line.wait()
            var batch: [(@Sendable () -> Void)?] = []
            while counter.done.wait(timeout: .now()) != .success {
                queue.withLock { swap(&$0, &batch) }
                if batch.isEmpty {
                    sched_yield()
                    continue
                }
                for index in batch.indices { batch[index].take()!() }
                batch.removeAll(keepingCapacity: true)
            }
        }
        let threads = (0..<producers).map { index in
            let share = blocks / producers + (index == 0 ? blocks % producers : 0)
            return NativeThread {
                if let processors, !pinCurrentThread(to: processors.producers) {
                    unpinned.add(1, ordering: .relaxed)
                }
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
        return unpinned.load(ordering: .relaxed) == 0 ? counter.blocksPerSecond : nil
    }
}
