// Shared test helpers: sockets, descriptors and child processes.
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

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

/// Invalidates `socket` after 30 s unless cancelled first: a `receive()` the kernel never answers
/// then throws, and the test fails instead of hanging. The test runs on a loop thread of its own
/// (`onOwnLoopThread`), so that the 30 s are the kernel's and the loops', not a wait for one of
/// Swift concurrency's threads.
func invalidate(_ socket: LoopDatagramSocket, on loop: Loop) -> LoopScheduled {
    loop.schedule(after: .seconds(30)) { socket.invalidate() }
}
