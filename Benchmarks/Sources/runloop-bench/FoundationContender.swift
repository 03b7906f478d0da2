import CRawPeer
import CoreFoundation
import Dispatch
import Foundation
import Glibc
import RunLoopKit
import Synchronization

// The workloads on Foundation's run loop as shipped with the Swift toolchain on Linux
// (swift-corelibs-foundation's CoreFoundation), at its best: the CF API directly, and
// `CFRunLoopWakeUp` after every cross-thread post because `CFRunLoopPerformBlock` (and so
// `RunLoop.perform`) does not wake a sleeping loop on Linux. Loops are kept alive by an
// unsignalled version-0 source (`RunLoop.add(Port())` traps on Linux).

/// A value handed between threads with explicit synchronisation.
struct Handed<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// The default mode, as `CFRunLoopPerformBlock` wants it.
private var defaultMode: CFRunLoopMode { kCFRunLoopDefaultMode }

/// A version-0 source that is never signalled: it keeps a mode alive without a timer.
func makeKeepAliveSource() -> CFRunLoopSource {
    var context = CFRunLoopSourceContext()
    context.perform = { _ in }
    return CFRunLoopSourceCreate(nil, 0, &context)
}

/// A thread running its CFRunLoop in the default mode until `stop()`.
final class CFLoopThread: @unchecked Sendable {
    let runLoop: CFRunLoop
    private let thread: NativeThread
    private let shared: ThreadShared

    private final class ThreadShared: @unchecked Sendable {
        let stopRequested = Atomic<Bool>(false)
        var runLoop: CFRunLoop?
    }

    /// Starts the thread; `setup` runs on it, with its run loop, before the loop first runs.
    /// Nil if the thread did not come up.
    init?(setup: (@Sendable (CFRunLoop) -> Void)? = nil) {
        let shared = ThreadShared()
        let ready = DispatchSemaphore(value: 0)
        let thread = NativeThread {
            let runLoop = CFRunLoopGetCurrent()!
            let keepAlive = makeKeepAliveSource()
            CFRunLoopAddSource(runLoop, keepAlive, defaultMode)
            setup?(runLoop)
            shared.runLoop = runLoop
            ready.signal()
            while !shared.stopRequested.load(ordering: .acquiring) {
                // A timeout beyond CF's limit means "no timeout": no timer is armed for the run.
                _ = CFRunLoopRunInMode(defaultMode, 1e10, false)
            }
            CFRunLoopSourceInvalidate(keepAlive)
        }
        guard ready.wait(timeout: .now() + 10) == .success, let runLoop = shared.runLoop else { return nil }
        self.runLoop = runLoop
        self.thread = thread
        self.shared = shared
    }

    /// Queues `block` and wakes the loop: Foundation's cross-thread post at its best.
    func perform(_ block: @escaping @Sendable () -> Void) {
        CFRunLoopPerformBlock(runLoop, defaultMode, block)
        CFRunLoopWakeUp(runLoop)
    }

    /// Stops the loop and joins the thread. `CFRunLoopStop` is lost when it arrives between two
    /// runs, so it is repeated until the thread has exited.
    @discardableResult
    func stop() -> Bool {
        shared.stopRequested.store(true, ordering: .releasing)
        for _ in 0..<500 {
            CFRunLoopStop(runLoop)
            CFRunLoopWakeUp(runLoop)
            if thread.wait(timeout: 0.01) { return thread.join(timeout: 1) }
        }
        return thread.join(timeout: 0)
    }
}

enum FoundationContender: Contender {
    // MARK: 1. Post throughput

    static func postThroughput(
        producers: Int, blocks: Int, capture: PostCapture, pinnedTo processors: PostProcessors?, timeout: Double
    ) -> Outcome<Double> {
        guard let thread = CFLoopThread() else { return .failure(BenchError(reason: "no loop thread")) }
        // In this order: the loop thread is stopped before the global goes.
        defer { PostCounter.current = nil }
        defer { thread.stop() }
        if let processors, !pinLoopThread(to: processors.loop, with: { thread.perform($0) }) {
            return .failure(BenchError(reason: "could not pin the loop thread"))
        }
        let counter = PostCounter(target: blocks)
        PostCounter.current = Unmanaged.passUnretained(counter)
        return measureProducers(producers, total: blocks, counter: counter, pinnedTo: processors, timeout: timeout) {
            index, share in
            switch capture {
            case .sharedObject:
                for _ in 0..<share { thread.perform { counter.ran() } }
            case .nothing:
                for _ in 0..<share { thread.perform { PostCounter.ranCurrent() } }
            case .typical, .typicalUnretained:
                postTypical(share, producer: index, counter: counter, retained: capture == .typical) {
                    thread.perform($0)
                }
            }
        }
    }

    // MARK: 2. Ping-pong

    private final class PingPongState: @unchecked Sendable {
        let a: CFLoopThread
        let b: CFLoopThread
        let roundTrips: Int
        var times: [Double] = []
        var start = 0.0
        var cancelled = false
        let done = DispatchSemaphore(value: 0)

        init(a: CFLoopThread, b: CFLoopThread, roundTrips: Int) {
            self.a = a
            self.b = b
            self.roundTrips = roundTrips
            times.reserveCapacity(roundTrips)
        }

        func ping() {
            start = monotonicSeconds()
            b.perform { self.a.perform { self.back() } }
        }

        func back() {
            guard !cancelled else { return }
            times.append((monotonicSeconds() - start) * 1e6)
            if times.count < roundTrips {
                ping()
            } else {
                done.signal()
            }
        }
    }

    static func pingPong(roundTrips: Int, timeout: Double) -> Outcome<[Double]> {
        guard let threadA = CFLoopThread(), let threadB = CFLoopThread() else {
            return .failure(BenchError(reason: "no loop thread"))
        }
        let state = PingPongState(a: threadA, b: threadB, roundTrips: roundTrips)
        threadA.perform { state.ping() }
        let finished = state.done.wait(timeout: .now() + timeout) == .success
        let cancelled = DispatchSemaphore(value: 0)
        threadA.perform {
            state.cancelled = true
            cancelled.signal()
        }
        _ = cancelled.wait(timeout: .now() + 10)
        threadB.stop()
        threadA.stop()
        return finished ? .success(state.times) : .failure(.timedOut)
    }

    // MARK: 3. Timers

    private final class LatenessState: @unchecked Sendable {
        let lateness: UnsafeMutableBufferPointer<Double>
        var fired = 0
        init(count: Int) {
            lateness = .allocate(capacity: count)
            lateness.initialize(repeating: .nan)
        }
        deinit { lateness.deallocate() }
    }

    static func timers(offsets: [Double], lead: Double, timeout: Double) -> Outcome<TimerRun> {
        let spread = offsets.max() ?? 0
        let run = onFreshThread(timeout: lead + spread + timeout + 60) { () -> Outcome<TimerRun> in
            let runLoop = CFRunLoopGetCurrent()
            let state = LatenessState(count: offsets.count)
            let first = CFAbsoluteTimeGetCurrent() + lead
            let dues = offsets.map { first + $0 }

            let start = monotonicSeconds()
            for index in dues.indices {
                let due = dues[index]
                let timer = CFRunLoopTimerCreateWithHandler(nil, due, 0, 0, 0) { _ in
                    state.lateness[index] = (CFAbsoluteTimeGetCurrent() - due) * 1e6
                    state.fired += 1
                }
                CFRunLoopAddTimer(runLoop, timer, defaultMode)
            }
            let end = monotonicSeconds()
            let endOffset = CFAbsoluteTimeGetCurrent() - first

            // Returns `finished` once the last one-shot timer has fired and left the mode.
            let deadline = monotonicSeconds() + lead + spread + timeout
            while state.fired < offsets.count, monotonicSeconds() < deadline {
                _ = CFRunLoopRunInMode(defaultMode, deadline - monotonicSeconds(), false)
            }
            guard state.fired == offsets.count else { return .failure(.timedOut) }
            return .success(
                TimerRun(scheduleSeconds: end - start, scheduleEndOffset: endOffset, lateness: Array(state.lateness)))
        }
        return run ?? .failure(.timedOut)
    }

    // MARK: 4. Timer churn

    static func timerChurn(timers: Int, window: Int) -> Outcome<Double> {
        let seconds = onFreshThread(timeout: 600) { () -> Double in
            let runLoop = CFRunLoopGetCurrent()
            var ring = [CFRunLoopTimer?](repeating: nil, count: window)
            let base = CFAbsoluteTimeGetCurrent() + 3600
            let start = monotonicSeconds()
            for index in 0..<timers {
                let fireDate = base + Double(churnJitterMicroseconds(index)) * 1e-6
                let timer = CFRunLoopTimerCreateWithHandler(nil, fireDate, 0, 0, 0) { _ in }
                CFRunLoopAddTimer(runLoop, timer, defaultMode)
                let slot = index % window
                if let old = ring[slot] { CFRunLoopTimerInvalidate(old) }
                ring[slot] = timer
            }
            for timer in ring { if let timer { CFRunLoopTimerInvalidate(timer) } }
            return monotonicSeconds() - start
        }
        return seconds.map { .success($0) } ?? .failure(.timedOut)
    }

    // MARK: 5. Iteration overhead

    private final class BusyState {
        var performed = 0
        var observed = 0
        var source: CFRunLoopSource?
    }

    static func iteration(seconds: Double, observers: Int) -> Outcome<Double> {
        let rate = onFreshThread(timeout: seconds + 30) { () -> Double in
            let runLoop = CFRunLoopGetCurrent()
            let state = BusyState()
            var context = CFRunLoopSourceContext()
            context.info = Unmanaged.passUnretained(state).toOpaque()
            context.perform = { info in
                let state = Unmanaged<BusyState>.fromOpaque(info!).takeUnretainedValue()
                state.performed += 1
                CFRunLoopSourceSignal(state.source)
            }
            let source = CFRunLoopSourceCreate(nil, 0, &context)!
            state.source = source
            CFRunLoopAddSource(runLoop, source, defaultMode)
            let watchers = (0..<observers).map { _ in
                CFRunLoopObserverCreateWithHandler(nil, CFRunLoopActivity.allActivities.rawValue, true, 0) { _, _ in
                    state.observed += 1
                }!
            }
            for observer in watchers { CFRunLoopAddObserver(runLoop, observer, defaultMode) }
            CFRunLoopSourceSignal(source)
            let start = monotonicSeconds()
            _ = CFRunLoopRunInMode(defaultMode, seconds, false)
            let elapsed = monotonicSeconds() - start
            for observer in watchers { CFRunLoopObserverInvalidate(observer) }
            CFRunLoopSourceInvalidate(source)
            state.source = nil
            return Double(state.performed) / elapsed
        }
        return rate.map { .success($0) } ?? .failure(.timedOut)
    }

    // MARK: 6. Descriptor ping-pong

    private final class DescriptorState: @unchecked Sendable {
        let roundTrips: Int
        let endA: Int32
        let endB: Int32
        var completed = 0  // loop A only
        var end = 0.0
        let done = DispatchSemaphore(value: 0)
        var sockets: [CFSocket] = []
        init(roundTrips: Int, endA: Int32, endB: Int32) {
            self.roundTrips = roundTrips
            self.endA = endA
            self.endB = endB
        }
    }

    /// A CFSocket read callback for `descriptor` in the calling thread's run loop.
    private static func attachSocket(
        _ descriptor: Int32, _ state: DescriptorState, _ callback: CFSocketCallBack
    ) -> CFSocket? {
        var context = CFSocketContext()
        context.info = Unmanaged.passUnretained(state).toOpaque()
        guard
            let socket = CFSocketCreateWithNative(
                nil, descriptor, CFSocketCallBackType.readCallBack.rawValue, callback, &context)
        else { return nil }
        // The benchmark closes the descriptors itself.
        CFSocketSetSocketFlags(socket, CFSocketGetSocketFlags(socket) & ~CFOptionFlags(kCFSocketCloseOnInvalidate))
        let source = CFSocketCreateRunLoopSource(nil, socket, 0)
        CFRunLoopAddSource(CFRunLoopGetCurrent(), source, defaultMode)
        return socket
    }

    static func descriptorPingPong(roundTrips: Int, timeout: Double) -> Outcome<Double> {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0 else {
            return .failure(BenchError(reason: "socketpair failed"))
        }
        defer {
            close(fds[0])
            close(fds[1])
        }
        let state = DescriptorState(roundTrips: roundTrips, endA: fds[0], endB: fds[1])
        let onA: CFSocketCallBack = { _, _, _, _, info in
            let state = Unmanaged<DescriptorState>.fromOpaque(info!).takeUnretainedValue()
            var byte: UInt8 = 0
            guard read(state.endA, &byte, 1) == 1 else { return }
            state.completed += 1
            if state.completed < state.roundTrips {
                _ = write(state.endA, &byte, 1)
            } else {
                state.end = monotonicSeconds()
                state.done.signal()
            }
        }
        let onB: CFSocketCallBack = { _, _, _, _, info in
            let state = Unmanaged<DescriptorState>.fromOpaque(info!).takeUnretainedValue()
            var byte: UInt8 = 0
            guard read(state.endB, &byte, 1) == 1 else { return }
            _ = write(state.endB, &byte, 1)
        }
        let socketA = Locked<Handed<CFSocket>?>(nil)
        let socketB = Locked<Handed<CFSocket>?>(nil)
        let threadA = CFLoopThread { _ in
            let socket = attachSocket(state.endA, state, onA)
            socketA.withLock { $0 = socket.map(Handed.init) }
        }
        let threadB = CFLoopThread { _ in
            let socket = attachSocket(state.endB, state, onB)
            socketB.withLock { $0 = socket.map(Handed.init) }
        }
        let sockets = [socketA.withLock { $0 }, socketB.withLock { $0 }]
        guard let threadA, let threadB, sockets.allSatisfy({ $0 != nil }) else {
            threadA?.stop()
            threadB?.stop()
            return .failure(BenchError(reason: "CFSocket could not be created"))
        }
        let start = monotonicSeconds()
        var byte: UInt8 = 120
        _ = write(state.endA, &byte, 1)
        let finished = state.done.wait(timeout: .now() + timeout) == .success
        for (thread, socket) in zip([threadA, threadB], sockets) {
            let removed = DispatchSemaphore(value: 0)
            thread.perform {
                if let socket { CFSocketInvalidate(socket.value) }
                removed.signal()
            }
            _ = removed.wait(timeout: .now() + 5)
        }
        threadA.stop()
        threadB.stop()
        guard finished else { return .failure(.timedOut) }
        return .success(Double(roundTrips) / (state.end - start))
    }

    // MARK: 7. Idle

    private final class Idle: IdleProbe, @unchecked Sendable {
        let count = Atomic<Int>(0)
        var thread: CFLoopThread?
        var wakeUps: Int { count.load(ordering: .relaxed) }
        func stop() -> Bool { thread?.stop() ?? false }
    }

    static func startIdle(withTimer: Bool) -> Outcome<any IdleProbe> {
        let idle = Idle()
        idle.thread = CFLoopThread { runLoop in
            let observer = CFRunLoopObserverCreateWithHandler(nil, CFRunLoopActivity.afterWaiting.rawValue, true, 0) {
                _, _ in
                idle.count.add(1, ordering: .relaxed)
            }
            CFRunLoopAddObserver(runLoop, observer, defaultMode)
            if withTimer {
                let timer = CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 0.5, 1, 0, 0) { _ in }
                CFRunLoopAddTimer(runLoop, timer, defaultMode)
            }
        }
        guard idle.thread != nil else { return .failure(BenchError(reason: "no loop thread")) }
        return .success(idle)
    }

    // MARK: 8. Memory

    static func memoryPerTimer(count: Int) -> Outcome<Double> {
        let bytes = onFreshThread(timeout: 600) { () -> Double in
            let runLoop = CFRunLoopGetCurrent()
            let base = CFAbsoluteTimeGetCurrent() + 3600
            for index in 0..<1_000 {
                let timer = CFRunLoopTimerCreateWithHandler(nil, base + Double(index) * 1e-6, 0, 0, 0) { _ in }
                CFRunLoopAddTimer(runLoop, timer, defaultMode)
                CFRunLoopTimerInvalidate(timer)
            }
            var timers: [CFRunLoopTimer] = []
            timers.reserveCapacity(count)
            raw_malloc_trim()
            let before = residentBytes()
            for index in 0..<count {
                let fireDate = base + Double(churnJitterMicroseconds(index)) * 1e-6
                let timer = CFRunLoopTimerCreateWithHandler(nil, fireDate, 0, 0, 0) { _ in }!
                CFRunLoopAddTimer(runLoop, timer, defaultMode)
                timers.append(timer)
            }
            let after = residentBytes()
            for timer in timers { CFRunLoopTimerInvalidate(timer) }
            return Double(after - before) / Double(count)
        }
        return bytes.map { .success($0) } ?? .failure(.timedOut)
    }

    static func memoryPerLoop(count: Int) -> Outcome<Double> {
        // The first loops fault in CoreFoundation's code pages: not the cost of one more loop.
        let warmUp = (0..<memoryWarmUpLoops).compactMap { _ in CFLoopThread() }
        let warmed = DispatchGroup()
        for thread in warmUp {
            warmed.enter()
            thread.perform { warmed.leave() }
        }
        guard warmed.wait(timeout: .now() + 30) == .success else { return .failure(.timedOut) }
        for thread in warmUp { _ = thread.stop() }
        raw_malloc_trim()
        let before = residentBytes()
        let threads = (0..<count).compactMap { _ in CFLoopThread() }
        let group = DispatchGroup()
        for thread in threads {
            group.enter()
            thread.perform { group.leave() }
        }
        let settled = group.wait(timeout: .now() + 30) == .success
        sleep(seconds: 0.05)
        let after = residentBytes()
        for thread in threads { thread.stop() }
        guard settled, threads.count == count else { return .failure(.timedOut) }
        return .success(Double(after - before) / Double(count))
    }
}
