import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// `pausesReadingWhileUnwritable`: a server whose replies are far larger than its requests stops
/// reading while its replies wait to go out, and reads on (its buffered requests first) once they
/// have, so its memory stays bounded and nothing hangs.
@Suite struct BackpressureTests {
    static let replySize = 1 << 20
    static let requests = 200

    final class Counts: Sendable {
        /// The most output the connection held, read right after each reply was queued.
        let mostQueued = Atomic<Int>(0)
        let answered = Atomic<Int>(0)
    }

    /// When the server's own `isReadingPaused` holds reading.
    enum UserPause: Sendable {
        case none
        /// From the start until the peer's end of stream is reported: the requests and the end of
        /// stream are then read in one wake-up.
        case untilThePeerEnds
        /// From the first reply, for 300 ms.
        case afterTheFirstReply
    }

    /// A server that answers each line with `replySize` bytes (the line, a newline, then dots),
    /// one line at a time while the connection is writable.
    final class Server: Sendable {
        let thread = LoopThread(name: "backpressure-server")
        let listener: LoopListener
        let counts = Counts()
        var port: Int { listener.localAddress.port ?? 0 }

        init(replySize: Int = BackpressureTests.replySize, userPause: UserPause = .none) throws {
            let counts = counts
            listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
                connection.pausesReadingWhileUnwritable = true
                connection.isReadingPaused = userPause == .untilThePeerEnds
                connection.onRead { connection, buffer in
                    while connection.isWritable, let line = buffer.readLine() {
                        var reply = line + [0x0A]
                        reply += [UInt8](repeating: UInt8(ascii: "."), count: replySize - reply.count)
                        connection.enqueue(reply)
                        _ = counts.mostQueued.max(connection.outputBufferedBytes, ordering: .relaxed)
                        let answered = counts.answered.add(1, ordering: .relaxed).newValue
                        if userPause == .afterTheFirstReply && answered == 1 {
                            connection.isReadingPaused = true
                            connection.loop.schedule(after: .milliseconds(300)) { connection.isReadingPaused = false }
                        }
                    }
                }
                connection.onEvent { connection, event in
                    if event == .readClosed && userPause == .untilThePeerEnds { connection.isReadingPaused = false }
                }
            }
            thread.loop.add(listener, forMode: .default)
        }

        func stop() {
            listener.invalidate()
            thread.stop()
        }
    }

    /// Sends `requests` lines at once, then reads the replies slowly, checking each one.
    static let slowClient = """
        import socket, sys, time
        count, size = int(sys.argv[2]), int(sys.argv[3])
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        s.settimeout(20)
        s.sendall(b"".join(b"request %07d\\n" % i for i in range(count)))
        s.shutdown(socket.SHUT_WR)
        start = time.monotonic()
        for i in range(count):
            reply = bytearray()
            while len(reply) < size:
                chunk = s.recv(min(size - len(reply), 65536))
                assert chunk, "the server closed after %d replies" % i
                reply += chunk
                time.sleep(0.0002)
            assert reply.startswith(b"request %07d\\n" % i), "reply %d: %r" % (i, bytes(reply[:20]))
        assert s.recv(1) == b"", "more than %d replies" % count
        print("%.3f" % (time.monotonic() - start))
        """

    @Test func repliesFarLargerThanRequestsKeepTheOutputBounded() throws {
        let server = try Server()
        defer { server.stop() }
        let (output, _) = try runPython(
            Self.slowClient, [String(server.port), String(Self.requests), String(Self.replySize)])
        #expect(!output.isEmpty)
        #expect(server.counts.answered.load(ordering: .relaxed) == Self.requests)
        let bound = LoopConnection.defaultWriteWatermarks.high + Self.replySize
        #expect(server.counts.mostQueued.load(ordering: .relaxed) <= bound)
    }

    /// Requests of exactly 4,096 bytes (256 of 16), read with their end of stream in one wake-up
    /// once the server's own pause ends: the handler stops at the high watermark with requests
    /// left in the buffer, and the connection waits for them before it closes.
    @Test func requestsReadWithThePeersEndAreAllAnswered() throws {
        let server = try Server(replySize: 64 * 1024, userPause: .untilThePeerEnds)
        defer { server.stop() }
        try runPython(Self.slowClient, [String(server.port), "256", String(64 * 1024)])
        #expect(server.counts.answered.load(ordering: .relaxed) == 256)
    }

    /// Either pause holds reading: the user's, for 300 ms from the first reply, holds it while
    /// the output falls to the low watermark.
    @Test func theUsersPauseAndTheOutputsCompose() throws {
        let server = try Server(userPause: .afterTheFirstReply)
        defer { server.stop() }
        let (output, _) = try runPython(Self.slowClient, [String(server.port), "20", String(Self.replySize)])
        let seconds = try #require(Double(output.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(seconds >= 0.25, "the replies took \(seconds) s, less than the user's pause")
        #expect(server.counts.answered.load(ordering: .relaxed) == 20)
    }
}
