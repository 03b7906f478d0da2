import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// A storm of signals whose handler was installed without `SA_RESTART` (so that a system call one
/// lands in fails with EINTR instead of going on) loses no byte of a 64 MiB echo over loopback TCP,
/// and reorders none, on either write path: the queue-only `write(_:)` from the loop's thread, and
/// the awaited `write(_:)` from a task. Each runs in a child process, whose SIGUSR1 is its own
/// (other tests route SIGUSR1 through a `LoopSignalSource` in the test process).
@Suite struct SignalStormTests {
    @Test func queueOnlyWritesFromTheLoopThreadLoseNoByte() async {
        await #expect(processExitsWith: .success) { await echoThroughSignalStorm(awaitingWrites: false) }
    }

    @Test func awaitedWritesFromATaskLoseNoByte() async {
        await #expect(processExitsWith: .success) { await echoThroughSignalStorm(awaitingWrites: true) }
    }
}

/// How much is echoed, and in what pieces it is written.
private let stormTotal = 64 << 20
private let stormChunk = 64 * 1024

/// Signals the handler has taken.
private let signalsTaken = Atomic<Int>(0)

/// Echoes `stormTotal` bytes while another thread sends SIGUSR1 to the client's and the server's
/// loop threads every 50 µs, and checks every byte as it comes back. Fails the child process on any
/// loss, reordering, error or stall.
private func echoThroughSignalStorm(awaitingWrites: Bool) async {
    interruptOnSIGUSR1()
    let payload = numberedBytes(stormTotal)
    let server: EchoServer
    do { server = try EchoServer() } catch { childFailure("echo server: \(error)") }
    let client = LoopThread(name: "storm-client")
    let storm = SignalStorm(targets: [loopThreadID(server.thread.loop), loopThreadID(client.loop)])
    let connection: LoopConnection
    do {
        connection = try await LoopConnection.connect(to: server.address, on: client.loop)
    } catch {
        childFailure("connect: \(error)")
    }
    let echoed = EchoCheck(payload)
    connection.onRead { _, buffer in echoed.take(&buffer) }
    storm.start()
    if awaitingWrites {
        connection.onEvent { _, event in
            if case .closed(let error?) = event { echoed.fail("the connection closed: \(error)") }
        }
        let writer = Task {
            for offset in stride(from: 0, to: stormTotal, by: stormChunk) {
                try await connection.write(Array(payload[offset..<offset + stormChunk]))
            }
            connection.shutdownOutput()
        }
        if case .failure(let error) = await writer.result { childFailure("awaited write: \(error)") }
    } else {
        let writer = QueueOnlyWriter(connection, payload, echoed)
        client.loop.perform { writer.writeWhileWritable() }
    }
    let finished = await eventually(within: .seconds(30)) { echoed.isFinished }
    storm.stop()
    if let failure = echoed.failure { childFailure(failure) }
    guard finished else { childFailure("\(echoed.received) of \(stormTotal) bytes came back within 30 s") }
    // The storm ran through the transfer (two signals every 50 µs at most: 40 a millisecond).
    let taken = signalsTaken.load(ordering: .relaxed)
    guard taken >= 100 else { childFailure("only \(taken) signals were taken during the transfer") }
    connection.close()
    client.stop()
    server.stop()
}

/// SIGUSR1's handler, installed without SA_RESTART: counts the signal and returns, so that a
/// system call it interrupted returns EINTR.
private func interruptOnSIGUSR1() {
    _ = signalsTaken.load(ordering: .relaxed)  // made before any handler can touch it
    var action = sigaction()
    action.__sigaction_handler.sa_handler = { _ in signalsTaken.add(1, ordering: .relaxed) }
    action.sa_flags = 0
    sigemptyset(&action.sa_mask)
    guard sigaction(SIGUSR1, &action, nil) == 0 else { childFailure("sigaction: errno \(errno)") }
}

/// `count` bytes in which every 4-byte word holds its own index: a byte lost, repeated or moved
/// changes what is found at every later offset.
private func numberedBytes(_ count: Int) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { bytes, initialized in
        let raw = UnsafeMutableRawBufferPointer(bytes)
        for word in 0..<(count / 4) {
            raw.storeBytes(of: UInt32(truncatingIfNeeded: word).littleEndian, toByteOffset: word * 4, as: UInt32.self)
        }
        initialized = count
    }
}

/// The thread of `loop` (running on a `LoopThread`), with SIGUSR1 unblocked in it: a thread
/// started from one that blocks the signal inherits the block, and a blocked signal interrupts
/// nothing.
private func loopThreadID(_ loop: Loop) -> pthread_t {
    let found = Locked<pthread_t?>(nil)
    loop.perform {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGUSR1)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
        found.withLock { $0 = pthread_self() }
    }
    guard waitUntil({ found.withLock { $0 } != nil }) else { childFailure("a loop thread did not answer") }
    return found.withLock { $0! }
}

/// A thread that sends SIGUSR1 to each target thread, then sleeps 50 µs, until stopped.
private final class SignalStorm: Sendable {
    private let targets: [pthread_t]
    private let stopped = Atomic<Bool>(false)
    private let ended = DispatchSemaphore(value: 0)

    init(targets: [pthread_t]) { self.targets = targets }

    func start() {
        Thread { [self] in
            while !stopped.load(ordering: .relaxed) {
                for target in targets { pthread_kill(target, SIGUSR1) }
                usleep(50)
            }
            ended.signal()
        }.start()
    }

    /// Returns once no more signal is sent.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        ended.wait()
    }
}

/// The client's side of the check, on its loop's thread: each byte that comes back is compared
/// with the byte sent at its offset.
private final class EchoCheck: Sendable {
    private let payload: [UInt8]
    private let state = Locked<(received: Int, failure: String?)>((0, nil))

    init(_ payload: [UInt8]) { self.payload = payload }

    var received: Int { state.withLock { $0.received } }
    var failure: String? { state.withLock { $0.failure } }
    var isFinished: Bool { state.withLock { $0.received == payload.count || $0.failure != nil } }

    func fail(_ reason: String) {
        state.withLock { $0.failure = $0.failure ?? reason }
    }

    func take(_ buffer: inout LoopBuffer) {
        let offset = received
        let count = buffer.count
        guard offset + count <= payload.count else {
            fail("\(offset + count) bytes came back, \(payload.count) were sent")
            return
        }
        let same = buffer.withContiguousBytes(upTo: count) { bytes in
            payload.withUnsafeBytes { memcmp(bytes.baseAddress!, $0.baseAddress! + offset, count) == 0 }
        }
        buffer.consume(count)
        if !same { fail("the \(count) bytes at offset \(offset) are not the ones sent there") }
        state.withLock { $0.received += count }
    }
}

/// The queue-only path, on the connection's loop thread: writes one chunk after another while the
/// connection is below its high watermark (a chunk goes to the socket at once when nothing is
/// queued before it), and goes on at each `writable` event.
private final class QueueOnlyWriter: @unchecked Sendable {
    // @unchecked: `written` and `shutDown` are touched on the connection's loop thread only.
    private let connection: LoopConnection
    private let payload: [UInt8]
    private var written = 0
    private var shutDown = false

    init(_ connection: LoopConnection, _ payload: [UInt8], _ echoed: EchoCheck) {
        self.connection = connection
        self.payload = payload
        connection.onEvent { [self] connection, event in
            switch event {
            case .writable: writeWhileWritable()
            case .closed(let error?): echoed.fail("the connection closed: \(error)")
            default: break
            }
        }
    }

    func writeWhileWritable() {
        while written < payload.count && connection.isWritable {
            connection.enqueue(payload[written..<written + stormChunk])
            written += stormChunk
        }
        if written == payload.count && !shutDown {
            shutDown = true
            connection.shutdownOutput()
        }
    }
}
