import Dispatch
import Foundation
import Synchronization

@testable import RunLoopKit

/// Runs `body` on a new thread (with its own loop, torn down when the thread exits) and returns
/// its result. Tests drive loops on their own threads so that no two tests share a loop.
func onFreshThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    let result = Mutex<T?>(nil)
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

/// A thread-safe log of events, for comparing sequences.
final class Recorder<Event: Sendable>: Sendable {
    private let storage = Mutex<[Event]>([])

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

/// The tests' lock, shaped like `Synchronization.Mutex` (and found before it by name lookup) but
/// built on `NSLock`, a pthread mutex that ThreadSanitizer understands: the sanitizer runs then
/// report real races only.
final class Mutex<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Runs `body` on a new pthread and joins it: when this returns, the thread has exited and its
/// loop has been torn down.
func runOnJoinedThread(_ body: @escaping @Sendable () -> Void) {
    final class Context: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Context(body)).toOpaque()
    let code = pthread_create(
        &thread, nil,
        { raw in
            Unmanaged<Context>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, context)
    precondition(code == 0, "pthread_create failed (\(code))")
    pthread_join(thread, nil)
}

// MARK: Sockets

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

/// A loopback echo server on a loop thread of its own: echoes what it reads and closes at the
/// client's end of stream. `configure` runs on the server's loop thread for each connection.
final class EchoServer: Sendable {
    let thread = LoopThread(name: "echo-server")
    let listener: LoopListener
    var address: SocketAddress { listener.localAddress }

    init(
        address: SocketAddress? = nil,
        configure: @escaping @Sendable (LoopConnection) -> Void = { _ in }
    ) throws {
        listener = try LoopListener(address: address ?? SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
            connection.onRead { connection, buffer in connection.write(&buffer) }
            configure(connection)
        }
        thread.loop.add(listener, forMode: .default)
    }

    func stop() {
        listener.invalidate()
        thread.stop()
    }
}

/// A unique Unix socket path in the temporary directory.
func temporaryUnixPath(_ name: String) -> String {
    "/tmp/rlk-\(getpid())-\(name)-\(UInt32.random(in: 0...UInt32.max)).sock"
}
