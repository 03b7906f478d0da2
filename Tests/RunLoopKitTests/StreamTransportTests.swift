import Glibc
import Testing

@testable import RunLoopKit

// The connection's transports driven directly over a socket pair: the plain socket's outcomes,
// and TLS's, with a server and a client session of the library's own contexts on the two ends.

/// A socket pair of its own, whose ends the test may close (`SocketPair` closes its own on deinit).
private func rawPair() -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    let code = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
    precondition(code == 0, "socketpair failed")
    return (fds[0], fds[1])
}

private func send(_ text: String, from descriptor: Int32) {
    let bytes = Array(text.utf8)
    #expect(write(descriptor, bytes, bytes.count) == bytes.count)
}

/// One wake-up's receive on `descriptor`, and the bytes it put in the input.
private func wakeUp(
    _ descriptor: Int32, limit: Int = 1 << 20, scratch: UnsafeMutableRawBufferPointer? = nil
) -> (ReceiveOutcome, String) {
    var input = LoopBuffer()
    let outcome = SocketTransport(descriptor: descriptor).receive(into: &input, limit: limit, scratch: scratch)
    return (outcome, String(decoding: input.read(maxLength: 1 << 20), as: UTF8.self))
}

@Suite struct PlainTransportTests {
    @Test func anEmptySocketWouldBlockAndAWakeUpFindsItDrained() {
        let pair = SocketPair()
        var byte: UInt8 = 0
        let outcome = withUnsafeMutableBytes(of: &byte) { SocketTransport(descriptor: pair.left).receive(into: $0) }
        #expect(outcome == .wouldBlock)
        #expect(wakeUp(pair.left) == (.drained(0), ""))
    }

    @Test func aShortReadDrainsAndTheEndOfStreamComesNext() {
        let pair = SocketPair()
        send("hello", from: pair.right)
        shutdown(pair.right, Int32(SHUT_WR))
        #expect(wakeUp(pair.left) == (.drained(5), "hello"))
        #expect(wakeUp(pair.left) == (.ended(0), ""))
    }

    @Test func theFirstReadGoesThroughTheScratchSpace() {
        let pair = SocketPair()
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 4, alignment: 16)
        defer { scratch.deallocate() }
        send("abcdefghij", from: pair.right)
        // 4 bytes fill the scratch space; the next read goes to the input and is short.
        #expect(wakeUp(pair.left, scratch: scratch) == (.drained(10), "abcdefghij"))
    }

    @Test func theInputLimitStopsTheReceive() {
        let pair = SocketPair()
        send("0123456789", from: pair.right)
        #expect(wakeUp(pair.left, limit: 4) == (.stopped(4), "0123"))
        #expect(wakeUp(pair.left) == (.drained(6), "456789"))
    }

    @Test func aResetFailsTheReceiveWithECONNRESET() {
        let (left, right) = rawPair()
        defer { close(left) }
        // Closing with unread input resets the peer.
        send("unread", from: left)
        close(right)
        #expect(wakeUp(left).0 == .failed(Errno(ECONNRESET)))
    }

    @Test func aFullSocketWouldBlockAndAGonePeerFailsTheSend() {
        let (left, right) = rawPair()
        defer { close(left) }
        let socket = SocketTransport(descriptor: left)
        let chunk = [UInt8](repeating: 7, count: 64 * 1024)
        var outcome = SocketOutcome.done(0)
        for _ in 0..<1_000 {
            outcome = chunk.withUnsafeBytes { socket.send($0) }
            if outcome == .wouldBlock { break }
        }
        #expect(outcome == .wouldBlock)
        close(right)
        #expect(chunk.withUnsafeBytes { socket.send($0) } == .failed(Errno(EPIPE)))
    }
}

/// A server session on `server` and a client one on `client`, contexts of the test certificates.
private func tlsEnds(server: Int32, client: Int32) throws -> (server: TLSTransport, client: TLSTransport) {
    let certificates = TestCertificates.shared
    let serverEnd = try TLSTransport(
        try certificates.server().context(), serverName: nil, verifyName: nil,
        socket: SocketTransport(descriptor: server), peer: .unnamedUnix)
    let clientEnd = try TLSTransport(
        try certificates.client().context(), serverName: "localhost", verifyName: "localhost",
        socket: SocketTransport(descriptor: client), peer: .unnamedUnix)
    return (serverEnd, clientEnd)
}

private let allowance = 1 << 20

/// Steps both handshakes until both are done (or one fails).
private func handshake(_ server: TLSTransport, _ client: TLSTransport) -> Bool {
    var serverDone = false
    var clientDone = false
    for _ in 0..<20 where !(serverDone && clientDone) {
        if !clientDone {
            let (outcome, _) = client.handshake(allowance: allowance, sendingNow: true)
            guard outcome == .done || outcome == .wantsInput else { return false }
            clientDone = outcome == .done
        }
        if !serverDone {
            let (outcome, _) = server.handshake(allowance: allowance, sendingNow: true)
            guard outcome == .done || outcome == .wantsInput else { return false }
            serverDone = outcome == .done
        }
    }
    return serverDone && clientDone && server.unsent.count == 0 && client.unsent.count == 0
}

/// `end`'s receive of what its socket holds, and the plaintext it gave.
private func receive(_ end: TLSTransport, allowance: Int = allowance) -> (ReceiveOutcome, String) {
    let plaintext = EventBuffer()
    let (outcome, _) = end.receive(into: plaintext, allowance: allowance, sendingNow: true)
    return (outcome, String(decoding: plaintext.remove(maxLength: 1 << 20), as: UTF8.self))
}

@Suite struct TLSTransportTests {
    @Test func recordsGoAtOnceAndArriveAsPlaintextThenTheSocketIsDrained() throws {
        let pair = SocketPair()
        let (server, client) = try tlsEnds(server: pair.left, client: pair.right)
        #expect(handshake(server, client))
        let (refusal, wire) = Array("hello".utf8).withUnsafeBytes { client.write($0, sendingNow: true) }
        #expect(refusal == nil)
        #expect(wire.sent > 5 && wire.sendFailure == nil && client.unsent.count == 0)
        #expect(receive(server) == (.drained(5), "hello"))
        #expect(receive(server) == (.drained(0), ""))
        // The client reads what the server sent after its handshake (TLS 1.3 session tickets).
        #expect(receive(client) == (.drained(0), ""))
    }

    @Test func recordsNotSentNowWaitUnsentInOrder() throws {
        let pair = SocketPair()
        let (server, client) = try tlsEnds(server: pair.left, client: pair.right)
        #expect(handshake(server, client))
        let (_, wire) = Array("kept".utf8).withUnsafeBytes { client.write($0, sendingNow: false) }
        #expect(wire.sent == 0 && client.unsent.count > 4)
        #expect(receive(server) == (.drained(0), ""))
        _ = SocketTransport(descriptor: pair.right).send(client.unsent)
        #expect(receive(server) == (.drained(4), "kept"))
    }

    @Test func noAllowanceReceivesNothingAndStops() throws {
        let pair = SocketPair()
        let (server, client) = try tlsEnds(server: pair.left, client: pair.right)
        #expect(handshake(server, client))
        _ = Array("later".utf8).withUnsafeBytes { client.write($0, sendingNow: true) }
        #expect(receive(server, allowance: 0) == (.stopped(0), ""))
        #expect(receive(server) == (.drained(5), "later"))
    }

    @Test func closeNotifyEndsTheStream() throws {
        let pair = SocketPair()
        let (server, client) = try tlsEnds(server: pair.left, client: pair.right)
        #expect(handshake(server, client))
        _ = Array("last".utf8).withUnsafeBytes { client.write($0, sendingNow: true) }
        #expect(client.closeNotify(sendingNow: true).sent > 0)
        #expect(receive(server) == (.ended(4), "last"))
    }

    @Test func theSocketsEndOfStreamEndsTheStreamToo() throws {
        let pair = SocketPair()
        let (server, client) = try tlsEnds(server: pair.left, client: pair.right)
        #expect(handshake(server, client))
        shutdown(pair.right, Int32(SHUT_WR))
        #expect(receive(server) == (.ended(0), ""))
    }

    @Test func aResetFailsTheReceiveWithECONNRESET() throws {
        let (left, right) = rawPair()
        defer { close(left) }
        let (server, client) = try tlsEnds(server: left, client: right)
        #expect(handshake(server, client))
        // The client leaves what the server sends unread, then closes: a reset.
        _ = Array("unread".utf8).withUnsafeBytes { server.write($0, sendingNow: true) }
        close(right)
        #expect(receive(server).0 == .failed(Errno(ECONNRESET)))
    }

    @Test func aBadRecordIsRefusedWithOpenSSLsReason() throws {
        let pair = SocketPair()
        let (server, client) = try tlsEnds(server: pair.left, client: pair.right)
        #expect(handshake(server, client))
        send("this is no TLS record, but plaintext sent to a TLS server", from: pair.right)
        guard case .refused(let error) = receive(server).0 else {
            Issue.record("a bad record was not refused")
            return
        }
        #expect(error.message.hasPrefix("TLS with "))
    }

    @Test func theHandshakeWantsInputThenFailsAtThePeersEnd() throws {
        let pair = SocketPair()
        let (server, _) = try tlsEnds(server: pair.left, client: pair.right)
        #expect(server.handshake(allowance: allowance, sendingNow: true).0 == .wantsInput)
        shutdown(pair.right, Int32(SHUT_WR))
        guard case .refused(let error) = server.handshake(allowance: allowance, sendingNow: true).0 else {
            Issue.record("the peer's end did not fail the handshake")
            return
        }
        #expect(error.message.contains("the peer closed the connection during the handshake"))
    }

    @Test func aHandshakeOfPlaintextIsRefused() throws {
        let pair = SocketPair()
        let (server, _) = try tlsEnds(server: pair.left, client: pair.right)
        send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", from: pair.right)
        guard case .refused(let error) = server.handshake(allowance: allowance, sendingNow: true).0 else {
            Issue.record("plaintext did not fail the handshake")
            return
        }
        #expect(error.message.hasPrefix("the TLS handshake with "))
    }

    /// How a read's end and what the socket said map to the outcome.
    static let readRows: [(Int, OpenSSLSession.Progress, SocketOutcome?, ReceiveOutcome)] = [
        (3, .wantsInput, .wouldBlock, .drained(3)),
        (3, .wantsInput, nil, .stopped(3)),
        (3, .wantsInput, .endOfStream, .ended(3)),
        (3, .closeNotify, .wouldBlock, .ended(3)),
        (3, .closeNotify, nil, .ended(3)),
        (0, .wantsInput, .failed(Errno(ECONNRESET)), .failed(Errno(ECONNRESET))),
        (0, .closeNotify, .failed(Errno(ECONNRESET)), .failed(Errno(ECONNRESET))),
    ]

    @Test func everyReadEndMapsToItsOutcome() throws {
        let pair = SocketPair()
        let (server, _) = try tlsEnds(server: pair.left, client: pair.right)
        for (count, stop, socket, expected) in TLSTransportTests.readRows {
            #expect(
                server.receiveOutcome(count, stop, socket) == expected, "\(count) \(stop) \(String(describing: socket))"
            )
        }
        #expect(
            server.receiveOutcome(0, .failed(reason: "bad"), .wouldBlock)
                == .refused(LoopError("TLS with \(SocketAddress.unnamedUnix) failed: bad")))
    }
}
