// Top-level code: an echo server on a worker loop whose accept handler keeps a per-connection
// `var` for that connection's read handler.
import RunLoopKit
import Synchronization

let echoed = Atomic<Int>(0)
let worker = LoopThread(name: "worker")
let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
    var lines = 0  // this connection's alone
    connection.onRead { connection, buffer in
        while let line = buffer.readLine() {
            lines += 1
            connection.enqueue(Array("\(lines): ".utf8) + line + [0x0A])
        }
    }
}
worker.loop.add(listener, forMode: .default)

let client = try await LoopConnection.connect(to: listener.localAddress, on: worker.loop)
client.enqueue(Array("a\nb\n".utf8))  // queue-only: top-level code is async here
var received: [UInt8] = []
while received.filter({ $0 == 0x0A }).count < 2 { received += try await client.read(maxLength: 100) }
precondition(String(decoding: received, as: UTF8.self) == "1: a\n2: b\n")
client.close()
listener.invalidate()
worker.stop()
