// WritingAServer.md, "Connections as an async sequence": the server's loop over
// `listener.connections`, with three clients of its own that then invalidate the listener, in one
// program's main.swift; run on the main thread by ServerProgramTests.
import RunLoopKit

let clients = LoopThread(name: "clients")

/// Connects three times to `listener`, prints each greeting, then invalidates the listener,
/// which ends the server's loop.
func greetThreeClients(of listener: LoopListener) async throws {
    let address = try SocketAddress(ipv4: "127.0.0.1", port: listener.localAddress.port!)
    for _ in 1...3 {
        let connection = try await LoopConnection.connect(to: address, on: clients.loop, timeout: .seconds(10))
        print(String(decoding: try await connection.read(maxLength: 100), as: UTF8.self), terminator: "")
        connection.close()
    }
    listener.invalidate()
}

let server = LoopThread(name: "server")
let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0))
server.loop.add(listener, forMode: .common)
// ... start the clients
let greeting = Task { try await greetThreeClients(of: listener) }

var served = 0
for await connection in listener.connections {
    // On the listener's loop and modes, with no handler set yet.
    served += 1
    try await connection.write(Array("hello, client \(served)\n".utf8))
    connection.close()
}
// The listener was invalidated: the sequence has ended.
print("served \(served)")
try await greeting.value
