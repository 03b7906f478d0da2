import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// Stress: many threads, many posts, invalidation races. Sizes are small enough for `make test`;
/// `RUNLOOPKIT_STRESS=1` (run by `make stress`) uses the full sizes.
@Suite struct StressTests {
    static let full = ProcessInfo.processInfo.environment["RUNLOOPKIT_STRESS"] == "1"

    /// 8 producers × N posts (1,000,000 each in full size): none lost, none twice, per-producer order.
    @Test func eightProducersLoseNothing() {
        let producers = 8
        let perProducer = Self.full ? 1_000_000 : 50_000
        let thread = LoopThread(name: "stress-sink")
        defer { thread.stop() }
        final class Tally: @unchecked Sendable {
            var next = [Int](repeating: 0, count: 8)
            var outOfOrder = 0
            var total = 0
        }
        let tally = Tally()  // touched only on the loop thread
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: producers) { producer in
            for index in 0..<perProducer {
                thread.loop.perform {
                    if tally.next[producer] != index { tally.outOfOrder += 1 }
                    tally.next[producer] = index + 1
                    tally.total += 1
                    if tally.total == producers * perProducer { done.signal() }
                }
            }
        }
        #expect(done.wait(timeout: .now() + 120) == .success)
        let (total, outOfOrder, next) =
            (try? awaitOnLoop(thread.loop) { (tally.total, tally.outOfOrder, tally.next) })
            ?? (-1, -1, [])
        #expect(total == producers * perProducer)
        #expect(outOfOrder == 0)
        #expect(next == [Int](repeating: perProducer, count: producers))
    }

    /// Four threads schedule blocks a few hundred microseconds ahead on one loop and cancel every
    /// other one, while the loop fires the rest: the queue's entries move under every thread's
    /// feet (cancels take entries out of the middle of its heap, the loop pops its top). Every
    /// block whose cancel failed runs exactly once, none whose cancel succeeded runs, and the
    /// queue is empty at the end.
    @Test func scheduledBlocksCancelledFromOtherThreadsWhileTheLoopFires() {
        let threads = 4
        let perThread = Self.full ? 200_000 : 10_000
        let thread = LoopThread(name: "stress-schedule")
        defer { thread.stop() }
        let runs = (0..<threads).map { _ in Locked([UInt8](repeating: 0, count: perThread)) }
        let cancelled = (0..<threads).map { _ in Locked([Bool](repeating: false, count: perThread)) }
        DispatchQueue.concurrentPerform(iterations: threads) { worker in
            for index in 0..<perThread {
                let handle = thread.loop.schedule(after: .microseconds((index * 37) % 500)) {
                    runs[worker].withLock { $0[index] &+= 1 }
                }
                if index & 1 == 0 {
                    handle.cancel()
                    cancelled[worker].withLock { $0[index] = handle.isCancelled }
                }
            }
        }
        // Every block is due within half a millisecond of the last schedule: wait for the loop to
        // have run them all (or for the queue to be empty, whichever says it first).
        let deadline = ContinuousClock.now + .seconds(60)
        while thread.loop.scheduledQueue.withLock({ $0.heap.count }) > 0 && ContinuousClock.now < deadline {
            usleep(1_000)
        }
        _ = try? awaitOnLoop(thread.loop) { 0 }  // the last due blocks have run
        #expect(thread.loop.scheduledQueue.withLock { $0.heap.count } == 0)
        #expect(thread.loop.scheduledPending.load(ordering: .acquiring) == 0)
        for worker in 0..<threads {
            let ran = runs[worker].withLock { $0 }
            let wasCancelled = cancelled[worker].withLock { $0 }
            let wrong = (0..<perThread).filter { ran[$0] != (wasCancelled[$0] ? 0 : 1) }
            #expect(wrong.isEmpty, "thread \(worker): \(wrong.count) blocks ran the wrong number of times")
        }
    }

    /// Repeating timers invalidated from other threads while they fire: every timer stops, none
    /// fires after its invalidation returned, and the loop keeps serving.
    @Test func timersInvalidatedFromOtherThreadsWhileFiring() {
        let thread = LoopThread(name: "stress-timers")
        defer { thread.stop() }
        let count = 200
        let firedAfterInvalidation = SharedCount()
        let invalidated = Locked([Bool](repeating: false, count: count))
        let timers = (0..<count).map { index in
            LoopTimer(after: .zero, repeating: .microseconds(200)) { _ in
                if invalidated.withLock({ $0[index] }) { firedAfterInvalidation.add(1) }
            }
        }
        for timer in timers { thread.loop.add(timer, forMode: .default) }
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for index in stride(from: worker, to: count, by: 4) {
                usleep(100)
                timers[index].invalidate()
                invalidated.withLock { $0[index] = true }
            }
        }
        // A callout already running when invalidate() returned may finish; after one more
        // iteration none may start.
        _ = try? awaitOnLoop(thread.loop) { 0 }
        let late = firedAfterInvalidation.value
        _ = try? awaitOnLoop(thread.loop) { 0 }
        #expect(firedAfterInvalidation.value == late)
        #expect(timers.allSatisfy { !$0.isValid })
        // The loop still serves: a block runs.
        #expect((try? awaitOnLoop(thread.loop) { 7 }) == 7)
    }

    /// Timers rescheduled from another thread while their loop's thread adds them, each
    /// reschedule landing as close to its timer's add as the threads allow: whichever comes first,
    /// the loop's heaps end up with the new fire date (an hour earlier), so every timer fires.
    @Test func timersRescheduledWhileTheirLoopAddsThem() {
        let count = Self.full ? 200_000 : 5_000
        final class Progress: Sendable {
            let adding = Atomic<Int>(-1)
        }
        let fired = onFreshThread { () -> Int in
            let loop = Loop.current
            let progress = Progress()
            var fired = 0
            let far = ContinuousClock.now + .seconds(3600)
            let timers = (0..<count).map { _ in LoopTimer(fireAt: far, loop.isolated { _ in fired += 1 }) }
            let rescheduled = DispatchSemaphore(value: 0)
            let rescheduler = Thread {
                for (index, timer) in timers.enumerated() {
                    while progress.adding.load(ordering: .acquiring) < index { Platform.cpuRelax() }
                    timer.fireDate = .now
                }
                rescheduled.signal()
            }
            rescheduler.start()
            for (index, timer) in timers.enumerated() {
                progress.adding.store(index, ordering: .releasing)
                loop.add(timer, forMode: .default)
            }
            rescheduled.wait()
            let deadline = ContinuousClock.now + .seconds(20)
            while fired < count, ContinuousClock.now < deadline {
                loop.run(mode: .default, for: .milliseconds(50))
            }
            return fired
        }
        #expect(fired == count)
    }

    /// Sources and observers invalidating themselves and each other inside callouts.
    @Test func itemsInvalidatingEachOtherInsideCallouts() {
        let calls = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            var sources: [LoopSource] = []
            var observers: [LoopObserver] = []
            for index in 0..<50 {
                let source = LoopSource(
                    order: index % 3,
                    loop.isolated {
                        calls.append("source \(index)")
                        sources[index].invalidate()  // itself
                        sources[(index * 7 + 3) % 50].invalidate()  // another, maybe later in this batch
                        observers[index % 10].invalidate()
                    })
                sources.append(source)
            }
            for index in 0..<10 {
                observers.append(
                    LoopObserver(
                        activities: .allActivities,
                        loop.isolated { observer, _ in
                            calls.append("observer \(index)")
                            observer.invalidate()
                            observers[(index + 1) % 10].invalidate()
                        }))
            }
            for source in sources {
                loop.add(source, forMode: .default)
                source.signal()
            }
            for observer in observers { loop.add(observer, forMode: .default) }
            loop.add(LoopSource {}, forMode: .default)
            for _ in 0..<5 { loop.run(mode: .default, for: .zero) }
            // Every source either ran (and invalidated itself) or was invalidated by another.
            #expect(sources.allSatisfy { !$0.isValid })
            #expect(observers.allSatisfy { !$0.isValid })
        }
        let events = calls.events
        // Each source ran at most once (it invalidated itself), and not after another invalidated it.
        let sourceRuns = events.filter { $0.hasPrefix("source") }
        #expect(Set(sourceRuns).count == sourceRuns.count)
        var invalidated = Set<Int>()
        for run in sourceRuns {
            let index = Int(run.dropFirst("source ".count))!
            #expect(!invalidated.contains(index), "source \(index) ran after it was invalidated")
            invalidated.insert(index)
            invalidated.insert((index * 7 + 3) % 50)
        }
        #expect(!sourceRuns.isEmpty)
        let observerRuns = events.filter { $0.hasPrefix("observer") }
        #expect(Set(observerRuns).count == observerRuns.count)
    }

    /// Threads that each create a loop (with its event base) and exit leave no descriptors and no
    /// memory behind: 1,000 threads here, 10,000 in full size. In a child process, so that tests
    /// running in parallel do not move the counts.
    @Test func threadChurnLeavesNoDescriptorsOrMemory() async {
        // Exit code 1: descriptors leaked; 2: memory grew.
        await #expect(processExitsWith: .success) {
            let threads = StressTests.full ? 10_000 : 1_000
            func churn(_ count: Int) {
                for _ in 0..<count {
                    runOnJoinedThread {
                        let loop = Loop.current
                        loop.add(LoopTimer(after: .zero) { _ in }, forMode: .default)
                        loop.run(mode: .default, for: .milliseconds(10))
                    }
                }
            }
            churn(100)  // warm-up: runtime caches, thread stacks
            let descriptorsBefore = StressTests.openDescriptors()
            let residentBefore = StressTests.residentBytes()
            churn(threads)
            let descriptorsAfter = StressTests.openDescriptors()
            let growth = StressTests.residentBytes() - residentBefore
            guard descriptorsAfter <= descriptorsBefore + 2 else {
                exit(1)
            }
            // A loop leaked per thread (event base, buffers) would be well over 1 KiB per thread.
            // Sanitizer runtimes keep memory per thread of their own: no RSS check under them.
            guard StressTests.sanitized || growth < threads * 1_024 + 8 << 20 else {
                exit(2)
            }
            exit(0)
        }
    }

    /// Whether a sanitizer runtime is loaded.
    static var sanitized: Bool {
        let process = dlopen(nil, RTLD_NOW)
        return dlsym(process, "__tsan_init") != nil || dlsym(process, "__asan_init") != nil
    }

    static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }

    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        return (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Runs `body` on `loop`'s thread and waits for its result (the loop must be running).
func awaitOnLoop<T: Sendable>(_ loop: Loop, timeout: Duration = .seconds(30), _ body: @escaping @Sendable () -> T)
    throws -> T
{
    let result = Locked<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    loop.perform {
        let value = body()
        result.withLock { $0 = value }
        done.signal()
    }
    let seconds = Double(timeout.components.seconds)
    guard done.wait(timeout: .now() + seconds) == .success else { throw LoopError("loop did not answer in time") }
    return result.withLock { $0! }
}
