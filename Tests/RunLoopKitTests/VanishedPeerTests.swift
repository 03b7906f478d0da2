import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// A connection that is not reading (paused, or stalled at its input limit) still learns that its
/// peer has gone: a reset closes it with `ECONNRESET`, the peer's end of stream is reported at
/// once, so no vanished peer holds a descriptor and buffers. The peers are Python's `socket`.
@Suite struct VanishedPeerTests {
    /// A server's connections, each event recorded with when it was reported.
    final class Server: Sendable {
        let thread = LoopThread(name: "vanished-peer")
        let listener: LoopListener
        let events = Recorder<(event: LoopConnection.Event, at: ContinuousClock.Instant)>()
        /// The lines read and the events, in the order the connection reported them.
        let log = Recorder<String>()
        var port: Int { listener.localAddress.port ?? 0 }

        /// `resumes`: reading resumes when `readClosed` is reported.
        init(
            paused: Bool, resumes: Bool = false, inputLimit: Int = LoopConnection.defaultInputLimit,
            idleTimeout: Duration? = nil
        ) throws {
            let events = events
            let log = log
            listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
                connection.isReadingPaused = paused
                connection.inputLimit = inputLimit
                connection.idleTimeout = idleTimeout
                // A line protocol: only whole lines are consumed.
                connection.onRead { _, buffer in
                    while let line = buffer.readLine() { log.append("line " + String(decoding: line, as: UTF8.self)) }
                }
                connection.onEvent { connection, event in
                    events.append((event, .now))
                    log.append("\(event)")
                    if resumes && event == .readClosed { connection.isReadingPaused = false }
                }
            }
            thread.loop.add(listener, forMode: .default)
        }

        func stop() {
            listener.invalidate()
            thread.stop()
        }

        var closed: (error: LoopError?, at: ContinuousClock.Instant)? {
            for (event, at) in events.events { if case .closed(let error) = event { return (error, at) } }
            return nil
        }

        var readClosedCount: Int { events.events.filter { $0.event == .readClosed }.count }
    }

    /// The chat-server shape: a client sends more than the input limit without a newline, so its
    /// connection stalls; then it leaves. The server is told, and the connection closes. (The
    /// excess must fit in the kernel's buffers: a peer's end of stream waits behind bytes that
    /// the receiver's closed window does not let through.)
    @Test func aConnectionStalledAtItsInputLimitLearnsThatThePeerLeft() async throws {
        let server = try Server(paused: false, inputLimit: 64 * 1024)
        defer { server.stop() }
        try runPython(
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"x" * 100000)
            s.close()
            """, [String(server.port)])
        #expect(await eventually { server.closed != nil }, "the stalled connection never noticed its peer left")
        #expect(server.readClosedCount == 1)
        #expect(server.closed?.error == nil)
        #expect(!server.log.events.contains { $0.hasPrefix("line") })
    }

    /// A peer that half-closes and waits for its answer: it sends far more than the input
    /// limit, then its end of stream. The stalled connection reports `readClosed` and closes in
    /// order: the input it had not read is dropped (read to its end), so the peer reads an end of
    /// stream, not a reset, and no socket is left in CLOSE_WAIT.
    @Test func aStalledConnectionEndsInOrderWhenThePeerEndsItsStream() async throws {
        let server = try Server(paused: false, inputLimit: 4096)
        defer { server.stop() }
        // 100,000 bytes fit in the kernel's buffers (a peer's end of stream waits behind bytes the
        // receiver's closed window does not let through: see WritingAServer.md).
        let (answer, _) = try runPython(
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"x" * 100000)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            try:
                print(repr(s.recv(10)))
            except OSError as error:
                print(repr(error))
            """, [String(server.port)])
        #expect(answer == "b''\n", "the peer read \(answer), not an end of stream")
        #expect(await eventually(within: .seconds(2)) { server.closed != nil }, "never closed: \(server.log.events)")
        #expect(server.log.events == ["readClosed", "closed"])
        #expect(tcpSockets(state: "08", localPort: server.port).isEmpty, "a socket was left in CLOSE_WAIT")
    }

    /// 256 KiB do not fit in the kernel's buffers: the peer's end of stream waits in its kernel
    /// behind the bytes the stalled connection's closed window keeps out, so no end of stream
    /// arrives (the peer's socket stays in FIN-WAIT-1, this one established). `idleTimeout` is
    /// what ends such a connection.
    @Test func anIdleLimitEndsAStalledConnectionWhosePeersEndCannotArrive() async throws {
        let server = try Server(paused: false, inputLimit: 4096, idleTimeout: .milliseconds(500))
        defer { server.stop() }
        try runPython(
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"x" * 262144)
            s.close()
            """, [String(server.port)])
        #expect(await eventually(within: .seconds(5)) { server.closed != nil }, "never closed: \(server.log.events)")
        #expect(server.closed?.error?.systemError == ETIMEDOUT)
    }

    @Test func aPausedConnectionLearnsOfAResetAtOnce() async throws {
        let server = try Server(paused: true)
        defer { server.stop() }
        let (_, exited) = try runPython(
            """
            import socket, struct, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"unread\\n")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            """, [String(server.port)])
        #expect(await eventually { server.closed != nil }, "a paused connection never noticed the reset")
        let closed = try #require(server.closed)
        #expect(closed.error?.systemError == ECONNRESET, "closed with \(String(describing: closed.error))")
        let late = closed.at - exited
        #expect(late < .milliseconds(100), "the reset was reported \(late) after the peer sent it")
        #expect(!server.log.events.contains { $0.hasPrefix("line") })
    }

    /// Paused, the end of stream is reported at once; what the peer sent before it is still read
    /// once reading resumes, and then the connection closes as at any end of stream.
    @Test func aPausedConnectionReportsThePeersEndAndKeepsItsInput() async throws {
        let server = try Server(paused: true, resumes: true)
        defer { server.stop() }
        // Python waits for the server's end of stream after sending its own: it exits only once
        // the connection has closed, which it does only if `readClosed` came while paused.
        try runPython(
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"last words\\n")
            s.shutdown(socket.SHUT_WR)
            s.settimeout(20)
            assert s.recv(1) == b""
            s.close()
            """, [String(server.port)])
        #expect(await eventually { server.closed != nil }, "the paused connection never closed")
        #expect(server.log.events == ["readClosed", "line last words", "closed"])
    }
}
