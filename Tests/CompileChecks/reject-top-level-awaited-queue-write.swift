// expect-error: is unavailable from asynchronous contexts
// Top-level code: Swift ranks the overloads here as in synchronous code, so this call would pick
// the queue-only `write(_:)` and return at once, 16 MB still queued. It must not compile.
import RunLoopKit

let worker = LoopThread(name: "worker")
let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
worker.loop.add(listener, forMode: .default)
let client = try await LoopConnection.connect(to: listener.localAddress, on: worker.loop)
for _ in 0..<16 { try await client.write([UInt8](repeating: 0x61, count: 1 << 20)) }
