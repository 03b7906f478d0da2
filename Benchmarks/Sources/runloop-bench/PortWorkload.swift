import Dispatch
import Glibc
import RunLoopKit
import Synchronization

// Workload 16: values sent through a `LoopPort`, one by one from producer threads, against what
// each peer does with the same three values from other threads (its typical-closure post, workload
// 1); and RunLoopKit's typical-closure `perform` against a bare locked queue of the same closures.

extension MetricID {
    static let port1 = "port.1"
    static let port4 = "port.4"
    static let portBatch4 = "port.batch.4"
    static let performFloor1 = "port.floor.1"
    static let performFloor4 = "port.floor.4"
    static let portFloor1 = "port.bare.1"
    static let portFloor4 = "port.bare.4"
    static let sharedWord4 = "port.word.4"
}

/// The port rows' message: the typical closure's three integers, by value.
struct PortReading: Sendable {
    let index: Int
    let weight: Int
    let producer: Int
}

/// A producer's array for its batches, reserved before the measurement starts.
final class ReadingBatch: @unchecked Sendable {
    private var readings: [PortReading] = []

    init(capacity: Int) { readings.reserveCapacity(capacity) }

    /// The array, now referenced only by the caller (so appending to it copies nothing).
    func take() -> [PortReading] {
        defer { readings = [] }
        return readings
    }
}

extension RunLoopKitContender {
    /// `messages` in total from `producers` threads, each sent alone with `send(_:)` (or, with
    /// `batch` over 1, `batch` at a time with `send(contentsOf:)`) to one `LoopPort<PortReading>`
    /// on a `LoopThread`, whose handler does the typical closure's work with the producer's tally;
    /// messages per second from the first producer's start to the last message handled.
    static func portThroughput(
        producers: Int, messages: Int, batch: Int = 1, pinnedTo processors: PostProcessors?, timeout: Double
    ) -> Outcome<Double> {
        let thread = LoopThread(name: "bench-port")
        defer { stop([thread]) }
        let loop = thread.loop
        if let processors, !pinLoopThread(to: processors.loop, with: { loop.perform($0) }) {
            return .failure(BenchError(reason: "could not pin the loop thread"))
        }
        let counter = PostCounter(target: messages)
        let tallies = (0..<producers).map { _ in PostTally() }
        let port = LoopPort<PortReading> { reading in
            tallies[reading.producer].add(index: reading.index, weight: reading.weight, producer: reading.producer)
            counter.ran()
        }
        defer { port.invalidate() }
        loop.add(port, forMode: .default)
        // Each producer's array for its batches, made before the start as a sender would keep one:
        // the first request of 1 KiB or more on a malloc arena sorts the blocks freed there before
        // (13 ms after GLib's rows), which is no part of sending.
        let batches = (0..<producers).map { _ in ReadingBatch(capacity: batch) }
        return measureProducers(producers, total: messages, counter: counter, pinnedTo: processors, timeout: timeout) {
            producer, share in
            guard batch > 1 else {
                for position in 0..<share {
                    port.send(PortReading(index: position, weight: position & 7, producer: producer))
                }
                return
            }
            var readings = batches[producer].take()
            for start in stride(from: 0, to: share, by: batch) {
                for position in start..<min(start + batch, share) {
                    readings.append(PortReading(index: position, weight: position & 7, producer: producer))
                }
                port.send(contentsOf: readings)
                readings.removeAll(keepingCapacity: true)
            }
        }
    }

    /// The port rows' floor: the same messages and handler work through a bare
    /// pthread-mutex-guarded array of `PortReading`s, drained by a thread that never sleeps (no
    /// loop, no wake-up), as `--post-floor`'s queue is for closures; messages per second from the
    /// first producer's start to the last message handled.
    static func portFloor(producers: Int, messages: Int, pinnedTo processors: PostProcessors?) -> Outcome<Double> {
        let queue = Locked<[PortReading]>([])
        let counter = PostCounter(target: messages)
        let tallies = (0..<producers).map { _ in PostTally() }
        let line = StartLine(parties: producers + 2)
        let unpinned = Atomic<Int>(0)
        let consumer = NativeThread {
            if let processors, !pinCurrentThread(to: processors.loop) { unpinned.add(1, ordering: .relaxed) }
            line.wait()
            var batch: [PortReading] = []
            while counter.done.wait(timeout: .now()) != .success {
                queue.withLock { swap(&$0, &batch) }
                if batch.isEmpty {
                    sched_yield()
                    continue
                }
                for reading in batch {
                    tallies[reading.producer].add(
                        index: reading.index, weight: reading.weight, producer: reading.producer)
                    counter.ran()
                }
                batch.removeAll(keepingCapacity: true)
            }
        }
        let threads = (0..<producers).map { producer in
            let share = messages / producers + (producer == 0 ? messages % producers : 0)
            return NativeThread {
                if let processors, !pinCurrentThread(to: processors.producers) { unpinned.add(1, ordering: .relaxed) }
                line.wait()
                counter.started(monotonicSeconds())
                for position in 0..<share {
                    let reading = PortReading(index: position, weight: position & 7, producer: producer)
                    queue.withLock { $0.append(reading) }
                }
            }
        }
        line.wait()
        for thread in threads { _ = thread.join(timeout: 60) }
        guard consumer.join(timeout: 60) else { return .failure(.timedOut) }
        guard unpinned.load(ordering: .relaxed) == 0 else {
            return .failure(BenchError(reason: "could not pin the threads"))
        }
        return .success(counter.blocksPerSecond)
    }

    /// What any single queue fed by 4 threads pays at the least: one atomic add per message on one
    /// shared word (the claim of a place in the queue), and nothing else, no message written or
    /// read; adds per second from the first producer's start to the last add.
    static func sharedWordFloor(producers: Int, messages: Int, pinnedTo processors: PostProcessors?) -> Outcome<Double>
    {
        let word = Atomic<Int>(0)
        let firstStart = Atomic<Int>(.max)
        let lastEnd = Atomic<Int>(0)
        let line = StartLine(parties: producers + 1)
        let unpinned = Atomic<Int>(0)
        let threads = (0..<producers).map { producer in
            let share = messages / producers + (producer == 0 ? messages % producers : 0)
            return NativeThread {
                if let processors, !pinCurrentThread(to: processors.producers) { unpinned.add(1, ordering: .relaxed) }
                line.wait()
                firstStart.min(Int(monotonicSeconds() * 1e9), ordering: .relaxed)
                for _ in 0..<share { word.add(1, ordering: .acquiringAndReleasing) }
                lastEnd.max(Int(monotonicSeconds() * 1e9), ordering: .relaxed)
            }
        }
        line.wait()
        for thread in threads { guard thread.join(timeout: 60) else { return .failure(.timedOut) } }
        guard unpinned.load(ordering: .relaxed) == 0 else {
            return .failure(BenchError(reason: "could not pin the threads"))
        }
        let nanoseconds = lastEnd.load(ordering: .relaxed) - firstStart.load(ordering: .relaxed)
        return .success(Double(word.load(ordering: .relaxed)) / (Double(nanoseconds) / 1e9))
    }

    /// The typical closure through `perform` divided by the same closures through a bare locked
    /// queue drained by a thread that never sleeps (`--post-floor`'s first row), measured one after
    /// the other.
    static func performOverFloor(producers: Int, blocks: Int, pinnedTo processors: PostProcessors?, timeout: Double)
        -> Outcome<Double>
    {
        let perform = postThroughput(
            producers: producers, blocks: blocks, capture: .typical, pinnedTo: processors, timeout: timeout)
        guard case .success(let performRate) = perform else { return perform }
        guard let floorRate = PostFloor.floor(producers: producers, blocks: blocks, pinnedTo: processors) else {
            return .failure(BenchError(reason: "the bare locked queue did not finish"))
        }
        return .success(performRate / floorRate)
    }
}

extension Workloads {
    static let port = Workload(
        number: 16, name: "port", title: "Port messages, and the closure path against its floor",
        metrics: [
            Metric(
                id: MetricID.port1, label: "port, 1 producer", unit: "messages/s", direction: .higherIsBetter,
                notes: portPeers),
            Metric(
                id: MetricID.port4, label: "port, 4 producers", unit: "messages/s", direction: .higherIsBetter,
                notes: portPeers),
            Metric(
                id: MetricID.portBatch4, label: "port, 4 producers, 64 at a time", unit: "messages/s",
                direction: .higherIsBetter, notes: portBatchPeers),
            Metric(
                id: MetricID.portFloor1, label: "port's floor: a bare locked array of the structs, 1 producer",
                unit: "messages/s", direction: .higherIsBetter),
            Metric(
                id: MetricID.portFloor4, label: "port's floor: a bare locked array of the structs, 4 producers",
                unit: "messages/s", direction: .higherIsBetter),
            Metric(
                id: MetricID.sharedWord4, label: "port's floor: one shared atomic add per message, 4 producers",
                unit: "adds/s", direction: .higherIsBetter),
            Metric(
                id: MetricID.performFloor1, label: "perform ÷ bare locked queue, typical closure, 1 producer",
                unit: "×", direction: .higherIsBetter),
            Metric(
                id: MetricID.performFloor4, label: "perform ÷ bare locked queue, typical closure, 4 producers",
                unit: "×", direction: .higherIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "`port.send(PortReading(index:weight:producer:))` (a struct of three integers) from producer threads to a `LoopPort` on a `LoopThread`, whose handler adds to the producer's tally and counts (the 64-at-a-time row: `port.send(contentsOf:)` of an array of 64 such structs, refilled); the last two rows divide the typical-closure `perform` of workload 1 by a bare pthread-mutex-guarded array of the same closures drained by a thread that never sleeps (no loop), measured one after the other in each repetition; the port's floor rows send the same structs through a bare pthread-mutex-guarded array drained by a thread that never sleeps, doing the same handler work; the last floor is 4 threads adding 1 to one shared atomic word per message, nothing else",
            .foundation: "the typical-closure rows of workload 1: `CFRunLoopPerformBlock` + `CFRunLoopWakeUp`",
            .libevent: "the typical-closure rows of workload 1: a malloc'd item on the mutex-protected queue + eventfd",
            .libuv:
                "the typical-closure rows of workload 1: a malloc'd item on a mutex-protected list + `uv_async_send`",
            .glib:
                "the typical-closure rows of workload 1: `g_main_context_invoke` with a `g_memdup2` copy of the values",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let processors = size.postPlacement.processors()
            for (producers, batch, id) in [
                (1, 1, MetricID.port1), (4, 1, MetricID.port4), (4, 64, MetricID.portBatch4),
            ] {
                sample.record(
                    id,
                    processors.flatMap { processors in
                        if implementation == .runLoopKit {
                            RunLoopKitContender.portThroughput(
                                producers: producers, messages: size.postBlocks, batch: batch, pinnedTo: processors,
                                timeout: size.timeout)
                        } else {
                            implementation.contender.postThroughput(
                                producers: producers, blocks: size.postBlocks, capture: .typical,
                                pinnedTo: processors, timeout: size.timeout)
                        }
                    })
            }
            /// A row of RunLoopKit's column alone (the others say why not).
            func recordOwn(_ id: String, _ why: String, _ measure: (PostProcessors?) -> Outcome<Double>) {
                guard implementation == .runLoopKit else {
                    sample.markMissing([id], BenchError(reason: why))
                    return
                }
                sample.record(id, processors.flatMap(measure))
            }
            let floorWhy = "the port rows' floor, measured once"
            for (producers, id) in [(1, MetricID.portFloor1), (4, MetricID.portFloor4)] {
                recordOwn(id, floorWhy) {
                    RunLoopKitContender.portFloor(producers: producers, messages: size.postBlocks, pinnedTo: $0)
                }
            }
            recordOwn(MetricID.sharedWord4, floorWhy) {
                RunLoopKitContender.sharedWordFloor(producers: 4, messages: size.postBlocks, pinnedTo: $0)
            }
            for (producers, id) in [(1, MetricID.performFloor1), (4, MetricID.performFloor4)] {
                recordOwn(id, "RunLoopKit's closure path against its own floor") {
                    RunLoopKitContender.performOverFloor(
                        producers: producers, blocks: size.postBlocks, pinnedTo: $0, timeout: size.timeout)
                }
            }
            return sample
        })

    /// The peers have no batched post either: each item goes alone, as in the row above.
    static let portBatchPeers: [Implementation: String] = [
        .foundation: "no batched post: a typical closure per message through `CFRunLoopPerformBlock`",
        .libevent: "no batched post: the typical malloc'd item per message",
        .libuv: "no batched post: the typical malloc'd item per message",
        .glib: "no batched post: `g_main_context_invoke` per message",
    ]

    /// The peers have no typed port: each posts the same three values its usual way.
    static let portPeers: [Implementation: String] = [
        .foundation: "no typed port: a typical closure through `CFRunLoopPerformBlock`",
        .libevent: "no typed port: the typical malloc'd item, freed on the loop thread",
        .libuv: "no typed port: the typical malloc'd item, freed on the loop thread",
        .glib: "no typed port: `g_main_context_invoke` with a copy of the values",
    ]
}
