// Awaited writes wait in every context: top-level code (where Swift ranks overloads as in
// synchronous code), an `async` function and a `Task`; of an array and of a slice. To a server
// that does not read, 16 MiB cannot go out: each write must still be waiting 300 ms later (a
// queue-only write returns at once); once the server reads, they finish. The queue-only spelling
// is `enqueue`.
import Glibc
import RunLoopKit
import Synchronization

final class Server: Sendable {
    let connection = Mutex<LoopConnection?>(nil)
    let received = Atomic<Int>(0)
}

let server = Server()
let worker = LoopThread(name: "worker")
let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
    connection.isReadingPaused = true
    connection.onRead { _, buffer in
        server.received.add(buffer.count, ordering: .relaxed)
        buffer.consume(buffer.count)
    }
    server.connection.withLock { $0 = connection }
}
worker.loop.add(listener, forMode: .default)
let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
let finished = Atomic<Int>(0)
var expected = 0

/// The server reads after 300 ms; meanwhile no write of `finished`'s count has returned.
func readAfterAWhile() -> Task<Void, any Error> {
    let before = finished.load(ordering: .relaxed)
    return Task {
        try await Task.sleep(for: .milliseconds(300))
        precondition(finished.load(ordering: .relaxed) == before, "an awaited write returned with 16 MiB unsent")
        while server.connection.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(1)) }
        server.connection.withLock { $0?.isReadingPaused = false }
    }
}

/// A new connection to the server, which does not read it until told (a fresh one: the kernel's
/// buffers of a connection that was read fast may have grown to hold 16 MiB).
func connect() async throws -> LoopConnection {
    server.connection.withLock { $0 = nil }
    return try await LoopConnection.connect(to: listener.localAddress, on: worker.loop)
}

func send(_ bytes: ArraySlice<UInt8>, to client: LoopConnection) async throws {
    try await client.write(bytes)
}

// Top-level code.
var client = try await connect()
var reader = readAfterAWhile()
for _ in 0..<16 { try await client.write(chunk) }
finished.add(1, ordering: .relaxed)
try await reader.value
expected += 16 << 20

// An `async` function (a slice) and a `Task` (an array).
client.close()
client = try await connect()
reader = readAfterAWhile()
let second = client
let slices = Task {
    for _ in 0..<8 { try await send(chunk[...], to: second) }
    finished.add(1, ordering: .relaxed)
}
let arrays = Task {
    for _ in 0..<8 { try await second.write(chunk) }
    finished.add(1, ordering: .relaxed)
}
try await reader.value
try await slices.value
try await arrays.value
expected += 16 << 20

client.enqueue(Array("end".utf8))
expected += 3
while server.received.load(ordering: .relaxed) < expected { try await Task.sleep(for: .milliseconds(5)) }
client.close()
listener.invalidate()
worker.stop()
