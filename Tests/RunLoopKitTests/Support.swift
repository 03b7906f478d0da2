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

// MARK: Sockets

/// A connected pair of non-blocking Unix stream sockets, closed on deinit.
final class SocketPair: Sendable {
    let left: Int32
    let right: Int32

    init() {
        var fds: [Int32] = [0, 0]
        let code = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
        precondition(code == 0, "socketpair failed")
        left = fds[0]
        right = fds[1]
    }

    deinit {
        close(left)
        close(right)
    }

    func send(_ byte: UInt8, from descriptor: Int32) {
        var value = byte
        _ = write(descriptor, &value, 1)
    }

    /// Reads everything available; returns the bytes.
    func drain(_ descriptor: Int32) -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { break }
            result += buffer[0..<count]
        }
        return result
    }
}

/// Waits (up to `limit`) until `condition` holds; returns whether it did. For outcomes another
/// thread reaches in its own time, such as a server closing its side.
func eventually(within limit: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}

/// A loop that runs for the whole test run, for completions a test does not look at.
let sink = sinkThread.loop
private let sinkThread = LoopThread(name: "test-sink")

/// Runs `loop` (the calling thread's) in `mode` until `done()` or 10 s, keeping the mode alive
/// with a source meanwhile. Returns whether `done()` became true.
@discardableResult
func runLoop(_ loop: Loop, in mode: Loop.Mode, until done: () -> Bool) -> Bool {
    let keepAlive = LoopSource {}
    loop.add(keepAlive, forMode: mode)
    defer { keepAlive.invalidate() }
    let deadline = ContinuousClock.now + .seconds(10)
    while !done() && ContinuousClock.now < deadline {
        loop.run(mode: mode, for: .milliseconds(20))
    }
    return done()
}

/// Records `message` as an issue, which the child hands to the test process over a descriptor it
/// already holds, and ends the child process with a failure.
func childFailure(_ message: String) -> Never {
    Issue.record(Comment(rawValue: message))
    exit(1)
}

/// Lowers the descriptor limit to just above what is open and takes every number below it, so
/// that the next descriptor fails with `EMFILE`. Returns the descriptors taken.
func exhaustDescriptors() -> [Int32] {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = rlim_t(openDescriptorCount() + 64)
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { childFailure("setrlimit: errno \(errno)") }
    var fillers: [Int32] = []
    fillers.reserveCapacity(128)
    while true {
        switch Platform.openPlaceholderDescriptor() {
        case .success(let descriptor):
            fillers.append(descriptor)
        case .failure(let failure):
            guard failure == Errno(EMFILE) else { childFailure("filling the descriptor table: \(failure)") }
            return fillers
        }
    }
}

/// Connects the blocking socket `descriptor` to `address`; false with `errno` set if it failed.
func connectSocket(_ descriptor: Int32, to address: SocketAddress) -> Bool {
    address.withSockaddr { connect(descriptor, $0, $1) } == 0
}

/// The number of open descriptors of the process (entries of `/proc/self/fd`).
func openDescriptorCount() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
        // Read up to the terminating NUL only: a directory entry is often shorter than `dirent`.
        let name = withUnsafePointer(to: &entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 1) { String(cString: $0) }
        }
        if name != "." && name != ".." { count += 1 }
    }
    // The directory being read is itself open while it is read.
    return count - 1
}
/// The state letter (`R`, `S`, `Z`, …) of `pid` if it is a child of this process not yet reaped.
func childState(_ pid: Int32) -> Character? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return nil }
    // After "pid (comm)": the state, then the parent's pid.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 1, Int32(fields[1]) == getpid() else { return nil }
    return fields[0].first
}

/// Whether `pid` is a zombie child of this process (exited and not reaped).
func isZombieChild(_ pid: Int32) -> Bool { childState(pid) == "Z" }

/// Queues work on `pool` that waits for the returned gate, and returns once it runs: the pool
/// then has one thread busy until the test signals the gate. `completion` is delivered on `loop`.
@discardableResult
func occupy(
    _ pool: LoopWorkPool, completingOn loop: Loop = sink,
    _ completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
) -> (gate: DispatchSemaphore, work: LoopWork) {
    let gate = DispatchSemaphore(value: 0)
    let started = DispatchSemaphore(value: 0)
    let work = pool.run(
        {
            started.signal()
            gate.wait()
        }, completingOn: loop, completion)
    precondition(started.wait(timeout: .now() + 10) == .success, "the pool started no work in 10 s")
    return (gate, work)
}

/// A loopback echo server on a loop thread of its own: echoes what it reads and closes at the
/// client's end of stream. `configure` runs on the server's loop thread for each connection.
final class EchoServer: Sendable {
    let thread = LoopThread(name: "echo-server")
    let listener: LoopListener
    var address: SocketAddress { listener.localAddress }

    /// With `tls`, connections reach `configure` once their handshake has succeeded.
    init(
        address: SocketAddress? = nil, tls: TLSConfiguration? = nil,
        configure: @escaping @Sendable (LoopConnection) -> Void = { _ in }
    ) throws {
        let accept = { @Sendable (connection: LoopConnection) in
            connection.onRead { connection, buffer in connection.write(&buffer) }
            configure(connection)
        }
        let address = try address ?? SocketAddress(ipv4: "127.0.0.1", port: 0)
        if let tls {
            listener = try LoopListener(address: address, tls: tls, accept)
        } else {
            listener = try LoopListener(address: address, accept)
        }
        thread.loop.add(listener, forMode: .default)
    }

    func stop() {
        listener.invalidate()
        thread.stop()
    }
}

extension LoopConnection {
    /// Sets `onEvent` to record the outcome of `closed` (nil for an orderly close) in `recorder`.
    func recordClosed(in recorder: Recorder<LoopError?>) {
        onEvent { _, event in
            if case .closed(let error) = event { recorder.append(error) }
        }
    }
}

/// A unique Unix socket path in the temporary directory.
func temporaryUnixPath(_ name: String) -> String {
    "/tmp/rlk-\(getpid())-\(name)-\(UInt32.random(in: 0...UInt32.max)).sock"
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`).
func threadCPUTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
}

/// Whether a TCP connection to `address` is refused at once (nothing listens there).
func refusesConnections(_ address: SocketAddress) -> Bool {
    let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(probe) }
    return address.withSockaddr { connect(probe, $0, $1) } != 0 && errno == ECONNREFUSED
}

/// Runs `body` on a new thread once `condition` holds (polling, up to 10 s; then `body` runs
/// anyway, so that a test fails instead of hanging): to act on a loop from outside once it has
/// reached a point, such as stopping it after a callout.
func once(_ condition: @escaping @Sendable () -> Bool, then body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() && ContinuousClock.now < deadline {
            usleep(1_000)
        }
        body()
    }
    thread.start()
}

/// A stand-in for "your own thread-safe queue" of the documentation's custom sources. Not named
/// `Inbox`: that is the library's own type, which `@testable import` makes visible here.
final class MessageQueue: Sendable {
    private let messages = Locked<[String]>([])
    func push(_ message: String) { messages.withLock { $0.append(message) } }
    func drain() -> [String] {
        messages.withLock { queue in
            defer { queue = [] }
            return queue
        }
    }
}

// MARK: Deadlocks

/// Runs `body` on a new thread and waits up to `limit` for it to return; returns whether it did.
/// A deadlock then fails the test that asked instead of hanging the suite (the stuck thread is
/// left behind).
func returns(within limit: Duration = .seconds(30), _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread {
        body()
        done.signal()
    }.start()
    let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
    return done.wait(timeout: .now() + seconds) == .success
}

/// An object a handler captures whose deinit runs `onDeinit`: set it to call back into the item,
/// its loop or another item, which must not deadlock however the handler is released.
final class CallsBack: @unchecked Sendable {
    var onDeinit: (() -> Void)?
    private(set) var ran = false
    deinit { onDeinit?() }
    func touch() { ran = true }
}

// MARK: Cancellation

/// How a cancelled call ended: its outcome, how long after the cancel, and whether the test had
/// to unblock it (it ignored the cancellation for `limit`).
struct CancelledCall<T: Sendable>: Sendable {
    let result: Result<T, any Error>
    let elapsed: Duration
    let unblocked: Bool

    var threwCancellation: Bool {
        if case .failure(let error) = result { return error is CancellationError }
        return false
    }
}

/// Starts `operation` in a task, cancels the task after `delay` (the call waits by then), and
/// returns how it ended. A call still running `limit` after the cancel is unblocked with
/// `unblock` (abort the connection, open a gate), so that a call that ignores cancellation fails
/// the test instead of hanging it.
func cancelWhileWaiting<T: Sendable>(
    after delay: Duration = .milliseconds(100), within limit: Duration = .seconds(2),
    unblock: @escaping @Sendable () -> Void, _ operation: @escaping @Sendable () async throws -> T
) async -> CancelledCall<T> {
    await timedCall(cancelAfter: delay, within: limit, unblock: unblock, operation)
}

/// Runs `operation` in a task (cancelled after `delay`, if one is given) and returns how it ended
/// and how long after the start (or the cancel) it did, unblocking it with `unblock` after
/// `limit`. The task runs on a loop thread of its own, and its end and the limit are timed there:
/// on a loaded machine the cooperative threads may all be busy with other tests for seconds.
func timedCall<T: Sendable>(
    cancelAfter delay: Duration?, within limit: Duration, unblock: @escaping @Sendable () -> Void,
    _ operation: @escaping @Sendable () async throws -> T
) async -> CancelledCall<T> {
    let runner = LoopThread(name: "timed-call")
    defer { runner.stop() }
    let ended = Locked<(result: Result<T, any Error>, at: ContinuousClock.Instant)?>(nil)
    let unblocked = Locked(false)
    let started = Locked(ContinuousClock.now)
    let task = Task(executorPreference: runner.loop) {
        let outcome = await result { try await operation() }
        ended.withLock { $0 = (outcome, .now) }
    }
    // The cancel and the limit on the runner's loop too, not after a sleep of the test's task.
    let loop = runner.loop
    let watch = { @Sendable in
        _ = loop.schedule(after: limit) {
            guard ended.withLock({ $0 == nil }) else { return }
            unblocked.withLock { $0 = true }
            unblock()
        }
    }
    if let delay {
        loop.schedule(after: delay) {
            started.withLock { $0 = .now }
            task.cancel()
            watch()
        }
    } else {
        loop.perform { watch() }
    }
    await task.value
    let (outcome, end) = ended.withLock { $0! }
    let start = started.withLock { $0 }
    return CancelledCall(result: outcome, elapsed: end - start, unblocked: unblocked.withLock { $0 })
}

/// The outcome of `body`, thrown or returned.
func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}

/// The inodes of this process's sockets (the `socket:[inode]` entries of `/proc/self/fd`).
func ownSocketInodes() -> Set<String> {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return [] }
    var inodes: Set<String> = []
    for name in names {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
            target.hasPrefix("socket:[")
        else { continue }
        inodes.insert(String(target.dropFirst(8).dropLast()))
    }
    return inodes
}

/// The inodes of the IPv4 sockets of the machine still connecting (SYN sent) to `port`.
func socketsConnecting(toPort port: Int) -> Set<String> { tcpSockets(state: "02", remotePort: port) }

/// The inodes of the IPv4 sockets of the machine in `state` (`/proc/net/tcp`'s hex code: "02" SYN
/// sent, "08" close wait), bound to `localPort` or connected to `remotePort` when given.
func tcpSockets(state: String, localPort: Int? = nil, remotePort: Int? = nil) -> Set<String> {
    guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return [] }
    func port(_ address: Substring) -> Int? { address.split(separator: ":").last.flatMap { Int($0, radix: 16) } }
    var inodes: Set<String> = []
    for line in table.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count > 9, fields[3] == state,
            localPort == nil || port(fields[1]) == localPort,
            remotePort == nil || port(fields[2]) == remotePort
        else { continue }
        inodes.insert(String(fields[9]))
    }
    return inodes
}

/// A loopback listener on a loop thread of its own that keeps every connection it accepts and
/// neither reads nor writes unless told: a silent peer, or one that never reads.
final class SilentServer: Sendable {
    let thread = LoopThread(name: "silent-server")
    let listener: LoopListener
    private let accepted = Locked<[LoopConnection]>([])
    var address: SocketAddress { listener.localAddress }

    init(readingPaused: Bool = false) throws {
        let accepted = self.accepted
        listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
            connection.isReadingPaused = readingPaused
            accepted.withLock { $0.append(connection) }
        }
        thread.loop.add(listener, forMode: .default)
    }

    /// The first connection accepted, once there is one (10 s at most).
    func firstConnection() async throws -> LoopConnection {
        _ = await eventually { accepted.withLock { !$0.isEmpty } }
        return try #require(accepted.withLock { $0.first })
    }

    func stop() {
        listener.invalidate()
        thread.stop()
    }
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
