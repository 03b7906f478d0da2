import Dispatch
import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// Every awaiting call ends promptly with `CancellationError` when its task is cancelled, and
/// leaves what it waited on usable. Each call is cancelled while it waits on something that
/// would not end by itself; one that ignored the cancellation is unblocked after the bound and
/// fails the test.
@Suite struct CancellationTests {
    @Test func aCancelledReadTakesNoBytesAndTheConnectionStaysUsable() async throws {
        let server = try SilentServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        let call = await cancelWhileWaiting(unblock: { connection.abort() }) {
            try await connection.read(maxLength: 100)
        }
        #expect(call.threwCancellation, "\(call.result)")
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        // The bytes that arrive later go to the next read, and writing works.
        let peer = try await server.firstConnection()
        peer.enqueue("late".utf8)
        var received: [UInt8] = []
        while received.count < 4 {
            let bytes = try await connection.read(maxLength: 100)
            if bytes.isEmpty { break }
            received += bytes
        }
        #expect(received == Array("late".utf8))
        let echoed = Recorder<[UInt8]>()
        peer.onRead { _, buffer in echoed.append(buffer.read(maxLength: buffer.count)) }
        try await connection.write(Array("ping".utf8))
        #expect(await eventually { echoed.events.flatMap { $0 } == Array("ping".utf8) })
    }

    @Test func aDeadlineBuiltFromATaskGroupReturns() async throws {
        struct TimedOut: Error {}
        let server = try SilentServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        let call = await timedCall(cancelAfter: nil, within: .seconds(2), unblock: { connection.abort() }) {
            try await withThrowingTaskGroup(of: [UInt8].self) { group in
                group.addTask { try await connection.read(maxLength: 100) }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(100))
                    throw TimedOut()
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        }
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        #expect(throws: TimedOut.self) { try call.result.get() }
    }

    @Test func anAlreadyCancelledReadOrWriteDoesNothing() async throws {
        let server = try SilentServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        let peer = try await server.firstConnection()
        let received = Recorder<[UInt8]>()
        peer.onRead { _, buffer in received.append(buffer.read(maxLength: buffer.count)) }
        peer.enqueue("waiting".utf8)
        // The bytes are in the client's input (read on its loop's thread) before the calls run.
        var buffered = 0
        for _ in 0..<5_000 where buffered < 7 {
            buffered = try await client.loop.submit { connection.input.count }
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(buffered == 7)
        let outcomes = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let read = await result { try await connection.read(maxLength: 100) }
            let write = await result { try await connection.write(Array("dropped".utf8)) }
            return (read, write)
        }.value
        #expect(throws: CancellationError.self) { try outcomes.0.get() }
        #expect(throws: CancellationError.self) { try outcomes.1.get() }
        #expect(try await connection.read(maxLength: 100) == Array("waiting".utf8))
        try await connection.write(Array("sent".utf8))
        #expect(await eventually { received.events.flatMap { $0 } == Array("sent".utf8) })
    }

    @Test func readAfterCloseOrAbortThrows() async throws {
        let server = try SilentServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        for local in ["close", "abort"] {
            let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
            // One read waits when the connection closes, one comes after.
            let waiting = Task { try await connection.read(maxLength: 100) }
            try await Task.sleep(for: .milliseconds(50))
            if local == "close" { connection.close() } else { connection.abort() }
            let pending = await waiting.result
            #expect(throws: LoopError.self, "\(local)") { try pending.get() }
            let error = await #expect(throws: LoopError.self, "\(local)") {
                _ = try await connection.read(maxLength: 100)
            }
            #expect(error?.message.contains("is closed") == true)
        }
    }

    @Test func aCancelledConnectClosesItsSocket() async throws {
        // Backlog 0 and never added to a loop: it accepts nothing, and once its queue is full the
        // kernel drops new handshakes, so a connect waits.
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0), backlog: 0) { _ in }
        defer { listener.invalidate() }
        var fillers: [Int32] = []
        defer { for descriptor in fillers { close(descriptor) } }
        for _ in 0..<4 {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
            listener.localAddress.withSockaddr { _ = connect(descriptor, $0, $1) }
            fillers.append(descriptor)
        }
        let port = try #require(listener.localAddress.port)
        let before = ownSocketInodes()
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let address = listener.localAddress
        let call = await cancelWhileWaiting(unblock: {}) {
            try await LoopConnection.connect(to: address, on: client.loop, timeout: .seconds(5))
        }
        #expect(call.threwCancellation, "\(call.result)")
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        // The socket the attempt made (ours, still connecting to the port) is closed.
        let leaked = { ownSocketInodes().subtracting(before).intersection(socketsConnecting(toPort: port)) }
        #expect(await eventually(within: .seconds(2)) { leaked().isEmpty }, "\(leaked())")
    }

    @Test func aCancelledConnectLeavesNoDescriptor() async throws {
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0), backlog: 0) { _ in }
        defer { listener.invalidate() }
        var fillers: [Int32] = []
        defer { for descriptor in fillers { close(descriptor) } }
        for _ in 0..<4 {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
            listener.localAddress.withSockaddr { _ = connect(descriptor, $0, $1) }
            fillers.append(descriptor)
        }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        // Counted once the client's loop is up, so that only the attempt's socket can differ
        // (other tests running meanwhile open and close descriptors too: waited on, not exact).
        try await client.loop.submit {}
        let before = openDescriptorCount()
        let address = listener.localAddress
        for _ in 0..<3 {
            let call = await cancelWhileWaiting(unblock: {}) {
                try await LoopConnection.connect(to: address, on: client.loop, timeout: .seconds(5))
            }
            #expect(call.threwCancellation, "\(call.result)")
        }
        // Waited on for long: a descriptor left behind stays, those of other tests come and go.
        #expect(
            await eventually(within: .seconds(60)) { openDescriptorCount() <= before },
            "\(openDescriptorCount() - before) more")
    }

    @Test func aCancelledWriteEndsItsWaitAndItsBytesStillGoOut() async throws {
        let server = try SilentServer(readingPaused: true)
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
        let size = 64 << 20
        // A block of a prime length, repeated: bytes sent out of order do not line up with it.
        let block = (0..<65_521).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
        var pattern: [UInt8] = []
        pattern.reserveCapacity(size + block.count)
        while pattern.count < size { pattern.append(contentsOf: block) }
        pattern.removeLast(pattern.count - size)
        let payload = pattern
        let call = await cancelWhileWaiting(unblock: { connection.abort() }) {
            try await connection.write(payload)
        }
        #expect(call.threwCancellation, "\(call.result)")
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        #expect(connection.outputBufferedBytes > 0)
        // The queued bytes are still sent, in order, once the peer reads.
        let peer = try await server.firstConnection()
        let received = Locked<(count: Int, matches: Bool)>((0, true))
        peer.onRead { _, buffer in
            let bytes = buffer.read(maxLength: buffer.count)
            received.withLock { state in
                if state.matches {
                    state.matches = payload[state.count..<state.count + bytes.count].withUnsafeBytes { expected in
                        bytes.withUnsafeBytes { memcmp(expected.baseAddress!, $0.baseAddress!, bytes.count) == 0 }
                    }
                }
                state.count += bytes.count
            }
        }
        peer.isReadingPaused = false
        #expect(await eventually(within: .seconds(60)) { received.withLock { $0.count } >= size })
        #expect(received.withLock { $0 } == (size, true))
    }

    @Test func aCancelledPoolRunReturnsWhileItsWorkRuns() async throws {
        let pool = LoopWorkPool(name: "cancel-pool", threads: 1)
        defer { pool.shutdown() }
        let gate = DispatchSemaphore(value: 0)
        let finished = Atomic<Bool>(false)
        let call = await cancelWhileWaiting(unblock: { gate.signal() }) {
            try await pool.run {
                gate.wait()
                finished.store(true, ordering: .releasing)
            }
        }
        #expect(call.threwCancellation, "\(call.result)")
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        // The work runs to the end all the same.
        if !call.unblocked { gate.signal() }
        #expect(await eventually { finished.load(ordering: .acquiring) })
    }

    @Test func aCancelledPoolRunThatWaitsInTheQueueNeverRuns() async throws {
        let pool = LoopWorkPool(name: "cancel-queue", threads: 1)
        defer { pool.shutdown() }
        let (gate, _) = occupy(pool)
        let ran = Atomic<Bool>(false)
        let call = await cancelWhileWaiting(unblock: { gate.signal() }) {
            try await pool.run { ran.store(true, ordering: .releasing) }
        }
        #expect(call.threwCancellation, "\(call.result)")
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        // An already cancelled task queues nothing.
        let submitted = pool.metrics.submitted
        let early = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await result { try await pool.run { ran.store(true, ordering: .releasing) } }
        }.value
        #expect(throws: CancellationError.self) { try early.get() }
        #expect(pool.metrics.submitted == submitted)
        gate.signal()
        try await pool.run {}
        let didRun = ran.load(ordering: .acquiring)
        #expect(!didRun)
    }

    @Test func aCancelledSubmitReturnsWithoutTheLoopAndItsBlockNeverRuns() async throws {
        let thread = LoopThread(name: "busy")
        defer { thread.stop() }
        // The loop is held in a block: a submitted block waits behind it.
        let gate = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        thread.loop.perform {
            held.signal()
            gate.wait()
        }
        held.wait()
        let ran = Atomic<Bool>(false)
        let call = await cancelWhileWaiting(unblock: { gate.signal() }) {
            try await thread.loop.submit { ran.store(true, ordering: .releasing) }
        }
        #expect(call.threwCancellation, "\(call.result)")
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        if !call.unblocked { gate.signal() }
        try await thread.loop.submit {}
        let didRun = ran.load(ordering: .acquiring)
        #expect(!didRun)
    }

    @Test func anAsyncConnectOnAnEndedLoopThrows() async throws {
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
        defer { listener.invalidate() }
        let address = listener.localAddress
        let loop = endedLoop()
        let call = await timedCall(cancelAfter: nil, within: .seconds(2), unblock: {}) {
            try await LoopConnection.connect(to: address, on: loop)
        }
        #expect(!call.unblocked)
        #expect(throws: LoopError.self) { try call.result.get() }
    }

    @Test func aCancelledExitStatusReturnsWhileTheChildRuns() async throws {
        let thread = LoopThread(name: "process")
        defer { thread.stop() }
        let child = try LoopProcess(executable: "/bin/sleep", arguments: ["3600"])  // outlives a slow sanitizer run
        defer { child.signal(SIGKILL) }
        thread.loop.add(child, forMode: .common)
        let call = await cancelWhileWaiting(unblock: { child.signal(SIGKILL) }) {
            try await child.exitStatus()
        }
        #expect(call.threwCancellation, "\(call.result)")
        #expect(!call.unblocked && call.elapsed < .seconds(2), "\(call.elapsed)")
        #expect(child.status == nil)
    }
}
