import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// A listener without a handler, for async code: `listener.connections` in order, accepting
/// paused while 64 wait unconsumed, a cancelled consumer, and the end of the sequence when the
/// listener is invalidated.
@Suite struct ListenerConnectionsTests {
    /// Blocking loopback clients of `port`, each with a 10 s receive limit.
    private func clients(_ count: Int, of port: Int) throws -> [Int32] {
        try (0..<count).map { _ in
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var limit = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            guard try connectSocket(descriptor, to: SocketAddress(ipv4: "127.0.0.1", port: port)) else {
                throw LoopError("connect failed", systemError: errno)
            }
            return descriptor
        }
    }

    /// What a client reads before the server ends the stream (10 s at most). Blocking: the tests
    /// call it on a thread of their own (`awaitFreshThread`), so that the consumers' tasks are not
    /// kept from Swift concurrency's threads while it waits.
    private static func readAll(_ descriptor: Int32) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func connectionsArriveInOrderAndEndWithTheListener() async throws {
        let thread = LoopThread(name: "connections")
        defer { thread.stop() }
        // The consumers' tasks run on a thread of their own, not on Swift concurrency's few
        // threads, which other tests may hold for seconds on a loaded machine.
        let consumers = LoopThread(name: "consumers")
        defer { consumers.stop() }
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0))
        thread.loop.add(listener, forMode: .common)
        let port = try #require(listener.localAddress.port)
        let serving = Task(executorPreference: consumers.loop) {
            var served = 0
            for await connection in listener.connections {
                served += 1
                connection.enqueue(Array("\(served)".utf8))
                connection.close()
            }
            return served
        }
        let sockets = try clients(3, of: port)
        defer { for socket in sockets { close(socket) } }
        // Each client is served, in the order it connected.
        #expect(await awaitFreshThread { sockets.map(Self.readAll) } == ["1", "2", "3"])
        listener.invalidate()
        #expect(await serving.value == 3)
    }

    /// With no consumer, the listener stops at 64 connections waiting and leaves the rest in the
    /// kernel's backlog; each one taken lets one more in; all are served in the end.
    @Test func acceptingPausesWhileSixtyFourWait() async throws {
        try await onOwnLoopThread { try await self.pausesWhileSixtyFourWait() }
    }

    private func pausesWhileSixtyFourWait() async throws {
        let thread = LoopThread(name: "connections-limit")
        defer { thread.stop() }
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0))
        thread.loop.add(listener, forMode: .common)
        let port = try #require(listener.localAddress.port)
        let incoming = try #require(listener.incoming)
        let sockets = try clients(70, of: port)
        defer { for socket in sockets { close(socket) } }
        #expect(await eventually { incoming.waitingCount == IncomingConnections.limit })
        // The backlog holds the others: given time, the listener takes no more.
        _ = await eventually(within: .milliseconds(300)) { false }
        #expect(incoming.waitingCount == IncomingConnections.limit)
        #expect(listener.descriptorSource.events.isEmpty)

        var iterator = listener.connections.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first != nil)
        #expect(await eventually { incoming.waitingCount == IncomingConnections.limit })
        var taken = first.map { [$0] } ?? []
        while taken.count < 70, let next = await iterator.next() { taken.append(next) }
        #expect(taken.count == 70)
        #expect(listener.descriptorSource.events == .readable)
        for connection in taken { connection.close() }
        listener.invalidate()
    }

    /// A consumer's task that is cancelled ends its own iteration; a connection that arrives
    /// later goes to the next consumer; invalidating the listener closes the connections still
    /// waiting (their clients read the end of stream) and ends every iteration.
    @Test func aCancelledConsumerStopsAndInvalidationClosesWhatWaits() async throws {
        let thread = LoopThread(name: "connections-cancel")
        defer { thread.stop() }
        // The consumers' tasks run on a thread of their own, not on Swift concurrency's few
        // threads, which other tests may hold for seconds on a loaded machine.
        let consumers = LoopThread(name: "consumers")
        defer { consumers.stop() }
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0))
        thread.loop.add(listener, forMode: .common)
        let port = try #require(listener.localAddress.port)
        let waiting = Task(executorPreference: consumers.loop) { () -> Int in
            var count = 0
            for await _ in listener.connections { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        #expect(await waiting.value == 0)

        let sockets = try clients(2, of: port)
        defer { for socket in sockets { close(socket) } }
        let incoming = try #require(listener.incoming)
        #expect(await eventually { incoming.waitingCount == 2 })
        let ended = Task(executorPreference: consumers.loop) { () -> Int in
            var count = 0
            for await connection in listener.connections {
                count += 1
                connection.enqueue(Array("taken".utf8))
                connection.close()
                if count == 1 { break }
            }
            return count
        }
        #expect(await ended.value == 1)
        #expect(await awaitFreshThread { Self.readAll(sockets[0]) } == "taken")
        listener.invalidate()
        // The second was never taken: closed with the listener, its client reads the end.
        #expect(await awaitFreshThread { Self.readAll(sockets[1]) } == "")
        var after = listener.connections.makeAsyncIterator()
        #expect(await after.next() == nil)
    }
}
