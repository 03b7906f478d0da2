import CRawPeer
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

// Threads, clocks, memory and small shared boxes used by every implementation's workloads.

/// Monotonic time in seconds (`CLOCK_MONOTONIC`, the clock the C workloads use too).
@inline(__always)
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) * 1e-9
}

/// CPU time used by the whole process so far, user and system, in seconds (`getrusage`).
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) * 1e-6
    let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) * 1e-6
    return user + system
}

/// Sleeps the calling thread.
func sleep(seconds: Double) {
    guard seconds > 0 else { return }
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR {
        request = remaining
    }
}

extension Duration {
    /// The duration in microseconds.
    var microseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1e6 + Double(attoseconds) * 1e-12
    }

    /// A duration from seconds.
    static func seconds(double seconds: Double) -> Duration {
        .nanoseconds(Int64((seconds * 1e9).rounded()))
    }
}

/// Resident set size of the process in bytes (`/proc/self/statm`).
func residentBytes() -> Int64 { Int64(raw_rss_bytes()) }

/// Loops each implementation starts and stops before measuring memory per loop: the first loops of
/// a process fault in the code pages they run (about 13 KB a loop of RunLoopKit's 200 were
/// `libswiftCore` and the benchmark's own code), which one more loop does not cost.
let memoryWarmUpLoops = 4

/// A mutable box shared between the measuring thread and a loop thread. The workloads hand it over
/// with explicit synchronisation (a semaphore, a thread join), so it is not itself thread-safe.
final class Box<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// A plain pthread (default attributes, like RunLoopKit's `LoopThread` and the C loops), with
/// waits that give up after a timeout instead of hanging.
final class NativeThread: @unchecked Sendable {
    private var thread = pthread_t()
    private let finished = DispatchSemaphore(value: 0)
    /// (the body has finished, the thread is joined or detached)
    private let status = Locked((finished: false, released: false))

    private final class Start {
        let body: () -> Void
        let finished: DispatchSemaphore
        init(body: @escaping () -> Void, finished: DispatchSemaphore) {
            self.body = body
            self.finished = finished
        }
    }

    /// Starts `body` on a new thread.
    init(_ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(Start(body: body, finished: finished)).toOpaque()
        let code = pthread_create(
            &thread, nil,
            { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                start.body()
                start.finished.signal()
                return nil
            }, start)
        precondition(code == 0, "runloop-bench: pthread_create failed (\(code))")
    }

    /// Waits up to `timeout` seconds for the body to finish; true once it has.
    func wait(timeout: Double) -> Bool {
        if status.withLock({ $0.finished }) { return true }
        guard finished.wait(timeout: .now() + timeout) == .success else { return false }
        status.withLock { $0.finished = true }
        return true
    }

    /// Waits for the thread to finish and joins it; false (and the thread is detached) after
    /// `timeout` seconds.
    @discardableResult
    func join(timeout: Double) -> Bool {
        if status.withLock({ $0.released }) { return status.withLock { $0.finished } }
        let done = wait(timeout: timeout)
        status.withLock { $0.released = true }
        if done {
            pthread_join(thread, nil)
        } else {
            pthread_detach(thread)
        }
        return done
    }
}

/// Runs `body` on a fresh thread and returns its result, or nil if it did not finish in `timeout`.
func onFreshThread<T>(timeout: Double, _ body: @escaping @Sendable () -> T) -> T? {
    let result = Box<T?>(nil)
    let thread = NativeThread { result.value = body() }
    guard thread.join(timeout: timeout) else { return nil }
    return result.value
}

/// What each block of the post workload captures.
enum PostCapture: Sendable {
    /// The run's counter, one object shared by every producer: each post retains it and each block
    /// that ran releases it, so its reference count's cache line travels between the cores with
    /// every block, whatever the run loop does.
    case sharedObject
    /// Nothing: the block reaches the counter through a global. What is left is the run loop's
    /// own cost (and, for the C peers, the same workload as the other).
    case nothing
    /// What users write: the counter, the producer's `PostTally` and three integers, used by a
    /// little work on the loop thread. The closure's context is allocated on the producer with
    /// every post and freed on the loop thread; the C peers post a malloc'd item carrying the
    /// same values.
    case typical
    /// The typical closure's values and work, with the two objects captured as `Unmanaged`
    /// references: its context is still allocated on the producer and freed on the loop thread,
    /// but no reference count changes (`--post-floor` only; the C peers' typical item is this).
    case typicalUnretained

    /// Whether the block carries the typical values.
    var isTypical: Bool { self == .typical || self == .typicalUnretained }
}

/// The second object a typical post captures: one per producer, written on the loop thread.
final class PostTally: @unchecked Sendable {
    private var sum = 0  // loop thread only
    private var count = 0  // loop thread only

    /// On the loop thread: the typical block's work (`raw_typical_run` in C).
    @inline(never)
    func add(index: Int, weight: Int, producer: Int) {
        sum &+= index &* weight &+ producer
        count += 1
    }
}

/// Posts `count` typical closures through `perform`, from producer number `producer`: each
/// captures `counter`, a tally of this producer's own and three integers.
@inline(__always)
func postTypical(
    _ count: Int, producer: Int, counter: PostCounter, retained: Bool = true,
    through perform: (@escaping @Sendable () -> Void) -> Void
) {
    let tally = PostTally()
    guard !retained else {
        for position in 0..<count {
            let weight = position & 7
            perform {
                tally.add(index: position, weight: weight, producer: producer)
                counter.ran()
            }
        }
        return
    }
    // The counter keeps the tally alive: it outlives the run.
    counter.keep(tally)
    let unretainedTally = UnmanagedBox(tally)
    let unretainedCounter = UnmanagedBox(counter)
    for position in 0..<count {
        let weight = position & 7
        perform {
            unretainedTally.object._withUnsafeGuaranteedRef {
                $0.add(index: position, weight: weight, producer: producer)
            }
            unretainedCounter.object._withUnsafeGuaranteedRef { $0.ran() }
        }
    }
}

/// An unretained reference that may cross threads (the owner keeps the object alive).
struct UnmanagedBox<Object: AnyObject>: @unchecked Sendable {
    let object: Unmanaged<Object>
    init(_ object: Object) { self.object = .passUnretained(object) }
}

/// The processors the post workload's loop thread and producers are pinned to.
struct PostProcessors: Sendable {
    let loop: Int32
    let producers: Int32
}

/// Where the post workload's threads run (`--placement`).
enum PostPlacement: String, Sendable, CaseIterable {
    /// Wherever the scheduler puts them: the documented runs.
    case scheduler
    /// The loop thread on the first processor the process may use, the producers on the second:
    /// every cache line the two sides share travels between the processors.
    case apart
    /// Every thread on the first processor: no line travels, one processor does all the work.
    case together

    /// The processors to pin the loop thread and the producers to; nil for the scheduler's choice.
    func processors() -> Outcome<PostProcessors?> {
        switch self {
        case .scheduler:
            return .success(nil)
        case .together:
            let first = raw_allowed_processor(0)
            guard first >= 0 else { return .failure(BenchError(reason: "no processor to pin to")) }
            return .success(PostProcessors(loop: first, producers: first))
        case .apart:
            let first = raw_allowed_processor(0)
            let second = raw_allowed_processor(1)
            guard first >= 0, second >= 0 else {
                return .failure(BenchError(reason: "placement apart needs two processors"))
            }
            return .success(PostProcessors(loop: first, producers: second))
        }
    }
}

/// Pins the calling thread to processor `cpu` (`raw_pin_thread`).
func pinCurrentThread(to cpu: Int32) -> Bool { raw_pin_thread(cpu) != 0 }

/// Pins a loop thread to processor `cpu` with a block run through `perform`; false if it did not
/// run within 10 s or could not pin.
func pinLoopThread(to cpu: Int32, with perform: (@escaping @Sendable () -> Void) -> Void) -> Bool {
    let pinned = Locked(false)
    let ran = DispatchSemaphore(value: 0)
    perform {
        let done = pinCurrentThread(to: cpu)
        pinned.withLock { $0 = done }
        ran.signal()
    }
    return ran.wait(timeout: .now() + 10) == .success && pinned.withLock { $0 }
}

/// The post workload's counter: counts blocks on the loop thread and notes when the last one ran.
final class PostCounter: @unchecked Sendable {
    let target: Int
    private var count = 0  // loop thread only
    private var end = 0.0
    let done = DispatchSemaphore(value: 0)
    /// When the first producer left the start line (on two cores the measuring thread may not
    /// run again until the producers are done).
    private let firstStart = Locked(Double.infinity)
    /// Objects the run's blocks use without retaining them.
    private let kept = Locked<[AnyObject]>([])

    /// The counter of the run in progress, for blocks that capture nothing: set before the
    /// producers start, cleared once the loop thread has stopped.
    nonisolated(unsafe) static var current: Unmanaged<PostCounter>?

    init(target: Int) { self.target = target }

    func started(_ time: Double) { firstStart.withLock { $0 = min($0, time) } }

    /// Keeps `object` alive as long as the counter.
    func keep(_ object: AnyObject) { kept.withLock { $0.append(object) } }

    /// On the loop thread: one block ran.
    func ran() {
        count += 1
        if count == target {
            end = monotonicSeconds()
            done.signal()
        }
    }

    /// On the loop thread, for a block that captures nothing: `ran()` on `current`, with no
    /// reference count touched.
    static func ranCurrent() {
        current?._withUnsafeGuaranteedRef { $0.ran() }
    }

    /// Blocks per second from the first producer's start to the last block's run; after `done`.
    var blocksPerSecond: Double { Double(target) / (end - firstStart.withLock { $0 }) }
}

/// The post workloads' producers: `producers` threads, pinned to `processors` if given, released
/// together from a start line, each calling `produce(producer, share)` with its share of `total`
/// (the first takes the remainder) after noting its start in `counter`; then the counter's rate
/// once the loop has run them all, or why not.
func measureProducers(
    _ producers: Int, total: Int, counter: PostCounter, pinnedTo processors: PostProcessors?, timeout: Double,
    _ produce: @escaping @Sendable (_ producer: Int, _ share: Int) -> Void
) -> Outcome<Double> {
    let unpinned = Atomic<Int>(0)
    let line = StartLine(parties: producers + 1)
    let threads = (0..<producers).map { producer in
        let share = total / producers + (producer == 0 ? total % producers : 0)
        return NativeThread {
            if let processors, !pinCurrentThread(to: processors.producers) {
                unpinned.add(1, ordering: .relaxed)
            }
            line.wait()
            counter.started(monotonicSeconds())
            produce(producer, share)
        }
    }
    line.wait()
    let finished = counter.done.wait(timeout: .now() + timeout) == .success
    for thread in threads { thread.join(timeout: timeout) }
    guard finished else { return .failure(.timedOut) }
    guard unpinned.load(ordering: .relaxed) == 0 else {
        return .failure(BenchError(reason: "could not pin the producers"))
    }
    return .success(counter.blocksPerSecond)
}

/// A start line for several threads: they all wait until the measuring thread opens it.
final class StartLine: @unchecked Sendable {
    private var barrier = pthread_barrier_t()

    init(parties: Int) {
        pthread_barrier_init(&barrier, nil, UInt32(parties))
    }

    deinit { pthread_barrier_destroy(&barrier) }

    func wait() { pthread_barrier_wait(&barrier) }
}

/// `count` offsets in seconds evenly spread over `[0, spread)`, in fire-date order: timer `i` is
/// due `i × spread / count` after the first.
func timerOffsets(count: Int, spread: Double) -> [Double] {
    (0..<count).map { spread * Double($0) / Double(count) }
}

/// The jitter (microseconds) of the never-firing timers of the churn and memory workloads.
@inline(__always)
func churnJitterMicroseconds(_ index: Int) -> Int { (index &* 7919) % 1_000_000 }
