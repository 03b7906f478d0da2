// Top-level code: a connection's event handler, run on a worker loop, counts closes into a
// top-level variable the main thread reads.
// expect-error: main actor-isolated var 'closes' can not be mutated from a nonisolated context
import RunLoopKit

var closes = 0
let worker = LoopThread(name: "worker")
let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
worker.loop.add(listener, forMode: .default)
let connection = try await LoopConnection.connect(to: listener.localAddress, on: worker.loop)
connection.onEvent { _, event in
    if case .closed = event { closes += 1 }
}
print(closes)
