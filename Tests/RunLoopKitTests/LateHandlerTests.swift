import Testing

@testable import RunLoopKit

/// Handlers set after the connection already had events (from another thread, once the peer's
/// end of stream was read) receive every one of them, in order: the input, `readClosed`, then
/// `closed` if the connection has closed.
@Suite struct LateHandlerTests {
    /// A server that, once it reads a byte, writes "x" and ends its output.
    final class Server: Sendable {
        let thread = LoopThread(name: "late-handler-server")
        let listener: LoopListener

        init() throws {
            listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
                connection.allowsHalfClosure = true
                connection.onRead { connection, buffer in
                    buffer.consume(buffer.count)
                    connection.enqueue(Array("x".utf8))
                    connection.shutdownOutput()
                }
            }
            thread.loop.add(listener, forMode: .default)
        }

        func stop() {
            listener.invalidate()
            thread.stop()
        }
    }

    /// Whether `connection` has read the peer's end of stream, asked on its loop's thread.
    private func hasReadTheEnd(_ connection: LoopConnection) -> Bool {
        let ended = Recorder<Bool>()
        connection.loop.perform { ended.append(connection.inputEnded) }
        _ = waitUntil { !ended.events.isEmpty }
        return ended.events.first ?? false
    }

    @Test(arguments: [false, true])
    func handlersSetAfterThePeersEndGetEveryEventInOrder(allowsHalfClosure: Bool) async throws {
        let server = try Server()
        defer { server.stop() }
        let client = LoopThread(name: "late-handler-client")
        defer { client.stop() }
        let connection = try await LoopConnection.connect(to: server.listener.localAddress, on: client.loop)
        connection.allowsHalfClosure = allowsHalfClosure
        connection.enqueue(Array("go".utf8))
        // No handler yet: the "x", the end of stream (and, without half-closure, the close) come first.
        #expect(await eventually { hasReadTheEnd(connection) })
        if !allowsHalfClosure { #expect(await eventually { !connection.isOpen }) }

        let log = Recorder<String>()
        connection.onRead { _, buffer in
            log.append("read \(buffer.count)")
            buffer.consume(buffer.count)
        }
        connection.onEvent { _, event in log.append("\(event)") }
        let expected = allowsHalfClosure ? ["read 1", "readClosed"] : ["read 1", "readClosed", "closed"]
        #expect(await eventually { log.events.count >= expected.count })
        #expect(log.events == expected)
        connection.close()
    }
}
