// WritingAServer.md's line-echo server and its client in one program's main.swift (the client
// awaits at top level; `port` is the listener's), run on the main thread by ServerProgramTests.
import Glibc
import RunLoopKit

let server = LoopThread(name: "echo")
let address = try SocketAddress(ipv4: "127.0.0.1", port: 0)  // 0: any free port
let listener = try LoopListener(address: address) { connection in
    // On the server loop's thread, in the listener's modes.
    connection.idleTimeout = .seconds(30)
    connection.onRead { connection, buffer in
        while let line = buffer.readLine() {
            connection.enqueue(line + [0x0A])
        }
        // A peer that sends without a newline stalls at `inputLimit` (1 MiB by default).
    }
    connection.onEvent { connection, event in
        switch event {
        case .readClosed: break  // the peer's FIN: flushed and closed next
        case .closed(let error?): print("\(connection.remoteAddress): \(error)")
        case .closed(nil), .writable: break
        }
    }
}
server.loop.add(listener, forMode: .common)
print("listening on \(listener.localAddress)")  // the port the system picked
// The loop holds the listener and its connections: no reference needs to be kept.
let port = listener.localAddress.port!

/// Sends three lines to the echo server on `port` of 127.0.0.1 and prints the answers.
func runClient(port: Int) async throws {
    let client = LoopThread(name: "client")
    defer { client.stop() }
    let address = try SocketAddress(ipv4: "127.0.0.1", port: port)
    do {
        let connection = try await LoopConnection.connect(
            to: address, on: client.loop, timeout: .seconds(5))
        for word in ["one", "two", "three"] {
            try await connection.write(Array("\(word)\n".utf8))  // waits below the high watermark
        }
        connection.shutdownOutput()  // FIN after the flush; reading goes on
        var answer: [UInt8] = []
        while true {
            let bytes = try await connection.read(maxLength: 4096)
            if bytes.isEmpty { break }  // the server closed its side
            answer += bytes
        }
        print(String(decoding: answer, as: UTF8.self))
    } catch let error as LoopError where error.systemError == ECONNREFUSED {
        print("nobody listens on \(address)")
    }
}

try await runClient(port: port)  // the port the server printed
