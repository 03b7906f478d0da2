import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// Volume and count: memory and descriptors stay bounded.
@Suite(.serialized) struct ConnectionLoadTests {
    /// 64 MiB echoed to a client that reads slowly: the server pauses reading while its output is
    /// above the high watermark, so what it holds stays near that watermark. Over TLS too (16 MiB:
    /// a debug build encrypts slowly), where the output holds records: one wake-up's reads may
    /// also finish a record begun before, and each record adds its header and tag.
    @Test(arguments: [false, true]) func echoOf64MiBWithASlowReaderStaysBounded(tls: Bool) async throws {
        let highest = Atomic<Int>(0)
        let certificates = TestCertificates.shared
        let server = try EchoServer(tls: tls ? try certificates.server() : nil) { connection in
            connection.onRead(
                Loop.current.isolated { connection, buffer in
                    connection.write(&buffer)
                    let held = connection.outputBufferedBytes
                    if held > highest.load(ordering: .relaxed) { highest.store(held, ordering: .relaxed) }
                    if !connection.isWritable { connection.isReadingPaused = true }
                })
            connection.onEvent { connection, event in
                if event == .writable { connection.isReadingPaused = false }
            }
        }
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let connection =
            tls
            ? try await LoopConnection.connect(to: server.address, on: client.loop, tls: certificates.client())
            : try await LoopConnection.connect(to: server.address, on: client.loop)
        let total = tls ? 16 << 20 : 64 << 20
        let chunk = [UInt8]((0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let writer = Task {
            for _ in 0..<(total / chunk.count) { try await connection.write(chunk) }
            connection.shutdownOutput()
        }
        var received = 0
        var mismatch = false
        var reads = 0
        while true {
            let bytes = try await connection.read(maxLength: 16 * 1024)
            if bytes.isEmpty { break }
            if !matchesPattern(bytes, chunk, at: received) { mismatch = true }
            received += bytes.count
            reads += 1
            // A slow reader: the server's output fills up behind it.
            if reads % 256 == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        try await writer.value
        #expect(received == total)
        #expect(!mismatch)
        let high = LoopConnection.defaultWriteWatermarks.high
        let bound = high + LoopConnection.readChunk * LoopConnection.readsPerWakeUp + (tls ? 32 * 1024 : 0)
        #expect(highest.load(ordering: .relaxed) <= bound, "the server held \(highest.load(ordering: .relaxed)) bytes")
    }

    @Test func tenThousandSequentialConnectionsLeakNoDescriptors() async throws {
        let server = try EchoServer()
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let before = try await descriptorsAfterWarmUp(server, client)
        for _ in 0..<10_000 {
            let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
            try await connection.write([42])
            #expect(try await connection.read(maxLength: 1) == [42])
            connection.close()
        }
        // Waited on for long: descriptors left behind stay, those of tests running beside come
        // and go.
        #expect(await eventually(within: .seconds(60)) { openDescriptorCount() <= before })
    }

    @Test func aThousandConcurrentConnectionsLeakNoDescriptors() async throws {
        let server = try EchoServer(address: SocketAddress(unixPath: temporaryUnixPath("many")))
        defer { server.stop() }
        let client = LoopThread(name: "client")
        defer { client.stop() }
        let before = try await descriptorsAfterWarmUp(server, client)
        let connections = try await withThrowingTaskGroup(of: LoopConnection.self) { group in
            for _ in 0..<1_000 {
                group.addTask { try await LoopConnection.connect(to: server.address, on: client.loop) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(openDescriptorCount() >= before + 1_000)  // the client ends at least
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, connection) in connections.enumerated() {
                group.addTask {
                    let message = Array("\(index)".utf8)
                    try await connection.write(message)
                    var echoed: [UInt8] = []
                    while echoed.count < message.count { echoed += try await connection.read(maxLength: 16) }
                    #expect(echoed == message)
                    connection.close()
                }
            }
            try await group.waitForAll()
        }
        let settled = await eventually(within: .seconds(60)) { openDescriptorCount() <= before }
        #expect(settled, "\(openDescriptorCount() - before) descriptors more than before")
    }
}

/// Whether `bytes` are the repeated `pattern` from offset `start` on (memcmp, run by run).
private func matchesPattern(_ bytes: [UInt8], _ pattern: [UInt8], at start: Int) -> Bool {
    var position = 0
    while position < bytes.count {
        let phase = (start + position) % pattern.count
        let run = min(pattern.count - phase, bytes.count - position)
        let equal = bytes.withUnsafeBytes { received in
            pattern.withUnsafeBytes { expected in
                memcmp(received.baseAddress! + position, expected.baseAddress! + phase, run) == 0
            }
        }
        if !equal { return false }
        position += run
    }
    return true
}

/// The open descriptor count once both loops run (their epoll and timer descriptors exist) and
/// one connection has come and gone.
private func descriptorsAfterWarmUp(_ server: EchoServer, _ client: LoopThread) async throws -> Int {
    let connection = try await LoopConnection.connect(to: server.address, on: client.loop)
    try await connection.write([1])
    _ = try await connection.read(maxLength: 1)
    // Closed once the server's end of stream came (a read after close() throws: the event tells).
    let closed = Recorder<LoopError?>()
    connection.recordClosed(in: closed)
    connection.close()
    _ = await eventually { closed.count == 1 }
    try await Task.sleep(for: .milliseconds(50))
    return openDescriptorCount()
}
