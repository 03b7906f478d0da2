import Dispatch
import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// Runs `body` on a new thread (with its own loop, torn down when the thread exits) and returns
/// its result. Tests drive loops on their own threads so that no two tests share a loop.
func onFreshThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    let result = Locked<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        let value = body()
        result.withLock { $0 = value }
        done.signal()
    }
    thread.start()
    done.wait()
    return result.withLock { $0! }
}

/// `onFreshThread` for async tests: the calling task waits without holding one of Swift
/// concurrency's few threads, which a test that runs a loop for seconds would otherwise keep from
/// the other tests.
func awaitFreshThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// Runs `body` in a task on a loop thread of its own and returns its result: its awaits resume on
/// that thread, not on one of Swift concurrency's few threads, which other tests may all hold for
/// tens of seconds on a loaded machine. For tests whose time limits run on a loop's thread (a
/// watchdog that ends a wait the kernel never answers) while the test's task awaits.
func onOwnLoopThread<T: Sendable>(_ body: sending @escaping () async throws -> T) async throws -> T {
    let runner = LoopThread(name: "test-task")
    defer { runner.stop() }
    return try await Task(executorPreference: runner.loop) { try await body() }.value
}

/// A thread-safe log of events, for comparing sequences.
final class Recorder<Event: Sendable>: Sendable {
    private let storage = Locked<[Event]>([])

    func append(_ event: Event) { storage.withLock { $0.append(event) } }
    var events: [Event] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
    func removeAll() { storage.withLock { $0.removeAll() } }
}

/// Milliseconds from `start` to now.
func milliseconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
}

extension Duration {
    var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}

/// Runs `body` on another thread as soon as `loop` is asleep in the kernel, to act on a loop while
/// it sleeps. After 5 s it runs `body` anyway, so that a loop that never sleeps fails the test
/// instead of hanging it.
func whenAsleep(_ loop: Loop, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        let limit = ContinuousClock.now + .seconds(5)
        while !loop.isWaiting && ContinuousClock.now < limit {
            sched_yield()
        }
        body()
    }
    thread.start()
}

/// Runs `body` on a new pthread and joins it: when this returns, the thread has exited and its
/// loop has been torn down.
func runOnJoinedThread(_ body: @escaping @Sendable () -> Void) {
    switch Platform.startThread(body) {
    case .success(let thread): Platform.joinThread(thread)
    case .failure(let failure): preconditionFailure("pthread_create failed: \(failure)")
    }
}

/// Counts the deinits of the `Tracked` objects made from it: a test lets an object be captured by
/// an item's handler and checks that dropping the item released it.
final class DeinitCounter: Sendable {
    private let count = Locked(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }

    /// An object that bumps this counter when it goes.
    func make() -> Tracked { Tracked(self) }
}

/// A count any thread may bump. A class, not a local `Atomic`: a handler may not capture a local
/// of a non-copyable type (it would capture it by reference).
final class SharedCount: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { count.load(ordering: .acquiring) }
    func add(_ amount: Int) { count.add(amount, ordering: .acquiringAndReleasing) }
}

/// See `DeinitCounter`.
final class Tracked: Sendable {
    private let counter: DeinitCounter
    init(_ counter: DeinitCounter) { self.counter = counter }
    deinit { counter.increment() }
    func touch() {}
}

/// A loop that has ended: its `LoopThread` was started and stopped.
func endedLoop() -> Loop {
    let thread = LoopThread(name: "ended")
    thread.stop()
    return thread.loop
}

/// Waits (polling, up to 5 s) until `condition` holds; returns whether it did.
func waitUntil(_ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(5)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        usleep(1_000)
    }
    return true
}

// MARK: Peers the library did not write

/// Runs `script` with `python3 -c`, `arguments` after it; waits for it to exit and returns when it
/// did, with its standard output. A script that fails (or cannot run) fails the calling test.
@discardableResult
func runPython(_ script: String, _ arguments: [String] = []) throws -> (output: String, exited: ContinuousClock.Instant)
{
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", "-c", script] + arguments
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let exited = ContinuousClock.now
    guard process.terminationStatus == 0 else {
        throw LoopError("python3 exited with status \(process.terminationStatus)")
    }
    return (String(decoding: data, as: UTF8.self), exited)
}

/// A Python script running beside the test, whose standard output is read line by line.
final class PythonPeer {
    private let process = Process()
    private let output = Pipe()
    private var pending = Data()

    init(_ script: String, _ arguments: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script] + arguments
        process.standardOutput = output
        try process.run()
    }

    /// The next line it printed (without the newline); "" once it closed its output.
    func readLine() throws -> String {
        while true {
            if let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
                pending = Data(pending[(end + 1)...])
                return line
            }
            let more = output.fileHandleForReading.availableData
            if more.isEmpty { return "" }
            pending.append(more)
        }
    }

    /// Everything else it prints, once it has exited with status 0 (a `LoopError` otherwise).
    func finish() throws -> String {
        let rest = pending + output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw LoopError("python3 exited with status \(process.terminationStatus)")
        }
        return String(decoding: rest, as: UTF8.self)
    }
}

// MARK: What the documentation's snippets print

/// The log of what the snippets of the calling file printed, in order (`private let printed =
/// printLog()` in each file that runs snippets): one log per file, so that suites of different
/// files running in parallel do not mix their lines.
func printLog(fileID: String = #fileID) -> Recorder<String> {
    printLogs.withLock { logs in
        if let log = logs[fileID] { return log }
        let log = Recorder<String>()
        logs[fileID] = log
        return log
    }
}

/// The `print` of the documentation's snippets: appends `"\(value)"` to the calling file's
/// `printLog()` instead of writing to standard output, so a test can check what a snippet printed.
/// Any thread.
func print(_ value: some Any, fileID: String = #fileID) {
    printLog(fileID: fileID).append("\(value)")
}

private let printLogs = Locked<[String: Recorder<String>]>([:])

/// A row of a transition table: the event `event` takes a state from `from` to `to`, and its
/// function returns `outcome`.
struct TransitionRow<State: Sendable, Event: Sendable, Outcome: Sendable>: Sendable, CustomTestStringConvertible {
    let from: State
    let event: Event
    let to: State
    let outcome: Outcome
    init(_ from: State, _ event: Event, _ to: State, _ outcome: Outcome) {
        (self.from, self.event, self.to, self.outcome) = (from, event, to, outcome)
    }
    var testDescription: String { "\(from) --\(event)--> \(to), \(outcome)" }
}

/// Every pair of states: the debug check of `State` allows the step exactly if `steps` (the rows of
/// its transition table) takes it.
func expectTheCheckAllowsExactly<State: CheckedStep & CaseIterable>(_ steps: [(State, State)]) {
    for from in State.allCases {
        for to in State.allCases {
            let listed = steps.contains { $0.0 == from && $0.1 == to }
            #expect(State.mayChange(from, to: to) == listed, "\(from) -> \(to)")
        }
    }
}
