// Top-level code awaiting writes where Swift picks the awaiting overload (an `async` function, a
// `Task`), of a slice and of an array: to a server that does not read, 32 MiB cannot go out, so
// the writes must still be waiting 300 ms later (a queue-only write returns at once); once the
// server reads, they finish. The queue-only spelling here is `enqueue`.
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
let client = try await LoopConnection.connect(to: listener.localAddress, on: worker.loop)
let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
let finished = Atomic<Int>(0)

func send(_ bytes: ArraySlice<UInt8>) async throws {
    try await client.write(bytes)
}

let slices = Task {
    for _ in 0..<16 { try await send(chunk[...]) }
    finished.add(1, ordering: .relaxed)
}
let arrays = Task {
    for _ in 0..<16 { try await client.write(chunk) }
    finished.add(1, ordering: .relaxed)
}
try await Task.sleep(for: .milliseconds(300))
precondition(finished.load(ordering: .relaxed) == 0, "an awaited write returned with 32 MiB unsent")
client.enqueue(Array("end".utf8))
while server.connection.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(1)) }
server.connection.withLock { $0?.isReadingPaused = false }
try await slices.value
try await arrays.value
while server.received.load(ordering: .relaxed) < 32 << 20 + 3 { try await Task.sleep(for: .milliseconds(5)) }
client.close()
listener.invalidate()
worker.stop()
