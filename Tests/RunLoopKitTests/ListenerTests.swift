import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

@Suite struct ListenerTests {
    @Test func portZeroGivesTheRealPortAndAnAddressInUseIsALoopError() throws {
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
        defer { listener.invalidate() }
        let port = try #require(listener.localAddress.port)
        #expect(port > 0)
        let error = #expect(throws: LoopError.self) {
            _ = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: port)) { _ in }
        }
        #expect(error?.systemError == EADDRINUSE)
        // With reusePort on both, two listeners share a port.
        let first = try LoopListener(address: SocketAddress(ipv6: "::1", port: 0), reusePort: true) { _ in }
        defer { first.invalidate() }
        let second = try LoopListener(
            address: SocketAddress(ipv6: "::1", port: first.localAddress.port!), reusePort: true
        ) { _ in }
        second.invalidate()
        #expect(!second.isValid)
    }

    @Test func aUnixPathThatExistsIsALoopError() throws {
        let path = temporaryUnixPath("exists")
        let listener = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
        let error = #expect(throws: LoopError.self) {
            _ = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
        }
        #expect(error?.systemError == EADDRINUSE)
        listener.invalidate()
        #expect(access(path, F_OK) != 0)
    }

    /// A Unix listener released without `invalidate()` removes its path too: the path can be
    /// bound again at once.
    @Test func aUnixListenerReleasedWithoutInvalidatingRemovesItsPath() async throws {
        let path = temporaryUnixPath("released")
        do {
            let unused = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
            #expect(unused.isValid)
        }
        #expect(access(path, F_OK) != 0)
        // One that was in a loop's mode and removed from it, then released.
        let thread = LoopThread(name: "listener")
        defer { thread.stop() }
        weak var weakListener: LoopListener?
        do {
            let listener = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
            thread.loop.add(listener, forMode: .default)
            thread.loop.remove(listener, forMode: .default)
            weakListener = listener
        }
        #expect(await eventually { weakListener == nil })
        #expect(access(path, F_OK) != 0)
        let again = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
        again.invalidate()
        #expect(access(path, F_OK) != 0)
    }

    /// A listener and its connections, dropped by the caller, keep working while the loop holds
    /// them, and are released (descriptors closed) once invalidated or closed.
    @Test func droppedItemsKeepWorkingAndAreReleasedAfter() async throws {
        let server = LoopThread(name: "server")
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        weak var weakListener: LoopListener?
        let connections = Recorder<Weak>()
        let address: SocketAddress
        do {
            let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
                connections.append(Weak(connection))
                connection.onRead { connection, buffer in connection.write(&buffer) }
            }
            server.loop.add(listener, forMode: .common)
            #expect(server.loop.contains(listener, inMode: .common))
            address = listener.localAddress
            weakListener = listener
        }
        for _ in 0..<3 {
            let connection = try await LoopConnection.connect(to: address, on: client.loop)
            try await connection.write(Array("hi".utf8))
            #expect(try await connection.read(maxLength: 10) == Array("hi".utf8))
            connection.close()
        }
        #expect(weakListener != nil)
        #expect(await eventually { connections.events.allSatisfy { $0.value == nil } })
        weakListener?.invalidate()
        #expect(await eventually { weakListener == nil })
        // Its socket is closed: the port refuses connections. (Descriptor counts are left to the
        // load tests: other suites open descriptors meanwhile.)
        // Closed by the loop's thread once it applies the change: soon, not at once.
        #expect(await eventually { refusesConnections(address) })
    }

    /// A connection removed from every mode is released; one in a mode that is not running waits.
    @Test func removingAConnectionFromItsModesReleasesIt() async throws {
        let server = try EchoServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        weak var weakConnection: LoopConnection?
        do {
            let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
            client.loop.remove(connection, forMode: .common)
            #expect(!client.loop.contains(connection, inMode: .common))
            weakConnection = connection
        }
        #expect(await eventually { weakConnection == nil })
    }

    @Test func badArgumentsAreProgrammerErrors() async {
        await #expect(processExitsWith: .failure) {
            _ = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0), backlog: -1) { _ in }
        }
        await #expect(processExitsWith: .failure) {
            let loop = LoopThread(name: "bad").loop
            LoopConnection.connect(to: try SocketAddress(ipv4: "127.0.0.1", port: 1), on: loop, timeout: .zero) { _ in }
        }
        await #expect(processExitsWith: .failure) {
            let server = try EchoServer()
            let client = LoopThread(name: "client")
            let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
            connection.writeWatermarks = (low: 10, high: 5)
        }
        await #expect(processExitsWith: .failure) {
            let server = try EchoServer()
            let client = LoopThread(name: "client")
            let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
            connection.inputLimit = -1
        }
    }

    /// Out of descriptors, the listener refuses waiting connections with its reserve descriptor
    /// and the loop does not spin. In a child process whose descriptor limit is lowered.
    @Test func runningOutOfDescriptorsDoesNotSpin() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let server = LoopThread(name: "server")
            let wakeUps = Atomic<Int>(0)
            let observer = LoopObserver(activities: .afterWaiting) { _, _ in wakeUps.add(1, ordering: .relaxed) }
            server.loop.add(observer, forMode: .default)
            let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
            server.loop.add(listener, forMode: .default)
            let clients = (0..<8).map { _ in socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            for client in clients {
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            }
            // No descriptor left: a limit just above what is open, and the numbers below it taken.
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = rlim_t(openDescriptorCount() + 4)
            guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { exit(2) }
            while open("/dev/null", O_RDONLY) >= 0 {}
            guard errno == EMFILE else { exit(3) }
            for client in clients {
                guard (listener.localAddress.withSockaddr { connect(client, $0, $1) }) == 0 else { exit(4) }
            }
            // Each waiting connection is accepted and closed at once: its client reads the end.
            for client in clients {
                var byte: UInt8 = 0
                let count = read(client, &byte, 1)
                guard count == 0 || (count < 0 && errno == ECONNRESET) else { exit(5) }
            }
            let before = wakeUps.load(ordering: .relaxed)
            usleep(300_000)
            let spins = wakeUps.load(ordering: .relaxed) - before
            guard spins < 50 else { exit(6) }
            exit(0)
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("child: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }
}

final class Weak: Sendable {
    nonisolated(unsafe) weak var value: LoopConnection?
    init(_ value: LoopConnection) { self.value = value }
}
