import Glibc

// How a connection's bytes meet its socket: as they are (`SocketTransport`), or through TLS, a
// filter whose BIO receives and sends through the same `SocketTransport` (`TLSTransport`), as
// libevent's bufferevents put an SSL filter over a socket's. The connection's I/O code calls
// `receive` and `write` on its `StreamTransport` and acts on the outcomes; which transport it has
// is the transport's business. An enum of the two, not a protocol: the plaintext path pays a
// switch, not a dynamic call or an existential box, per read and write.

/// What one call on the socket did.
enum SocketOutcome: Equatable {
    /// This many bytes were received or sent (a send may take none).
    case done(Int)
    /// Nothing now (EAGAIN): the socket has no more to read, or no room to send.
    case wouldBlock
    /// A receive read the peer's end of stream.
    case endOfStream
    /// The call failed (not EAGAIN; an interrupted call was made again).
    case failed(Errno)

    /// A receive's result: 0 is the end of stream.
    @inline(__always)
    init(received: Result<Int, Errno>) {
        switch received {
        case .success(0): self = .endOfStream
        case .success(let count): self = .done(count)
        case .failure(let failure): self = failure == .wouldBlock ? .wouldBlock : .failed(failure)
        }
    }

    /// A send's result.
    @inline(__always)
    init(sent: Result<Int, Errno>) {
        switch sent {
        case .success(let count): self = .done(count)
        case .failure(let failure): self = failure == .wouldBlock ? .wouldBlock : .failed(failure)
        }
    }
}

/// What one wake-up's receive gave the connection's input.
enum ReceiveOutcome: Equatable {
    /// This many bytes went to the input, and the socket has no more now (a short read, or EAGAIN).
    case drained(Int)
    /// This many bytes went to the input, and the wake-up's budget or the input limit stopped the
    /// receive: more may wait.
    case stopped(Int)
    /// This many bytes went to the input, then the peer ended its stream (its FIN, or TLS's
    /// close_notify).
    case ended(Int)
    /// A receive failed (ECONNRESET, ...).
    case failed(Errno)
    /// The transport failed (a bad TLS record, an alert, a failed handshake): the connection
    /// closes with this error.
    case refused(LoopError)
}

/// What a write did with the bytes it was given.
enum WriteOutcome {
    /// The socket took this many of the bytes now (0 when it was not tried, or took none): the
    /// rest are the caller's to queue.
    case sent(Int)
    /// The transport turned the bytes into bytes of its own (TLS records): this many of those
    /// went to the socket now, and `rest` holds the others, to be queued.
    case encoded(sent: Int, rest: EventBuffer)
    /// The transport takes no bytes now (a TLS handshake is under way): they are dropped.
    case dropped
    /// A send failed (EPIPE, ECONNRESET, ...).
    case failed(Errno)
    /// The transport failed: the connection closes with this error.
    case refused(LoopError)

    /// What a send of the caller's bytes on the plain socket gave.
    @inline(__always)
    init(_ sent: SocketOutcome) {
        switch sent {
        case .done(let count): self = .sent(count)
        case .wouldBlock, .endOfStream: self = .sent(0)
        case .failed(let failure): self = .failed(failure)
        }
    }
}

/// A connected stream socket's receives and sends, as outcomes: the Platform layer's calls for
/// the connection's plaintext and for a TLS session's BIO alike. Loop thread only.
struct SocketTransport {
    let descriptor: Int32

    /// `recv` into `bytes`.
    @inline(__always)
    func receive(into bytes: UnsafeMutableRawBufferPointer) -> SocketOutcome {
        SocketOutcome(received: Platform.receive(descriptor, into: bytes))
    }

    /// `readv` of up to `maxLength` bytes into the free space of `buffer`.
    @inline(__always)
    func receive(into buffer: EventBuffer, maxLength: Int) -> SocketOutcome {
        SocketOutcome(received: buffer.read(from: descriptor, maxLength: maxLength))
    }

    /// `send` of `bytes` (never SIGPIPE).
    @inline(__always)
    func send(_ bytes: UnsafeRawBufferPointer) -> SocketOutcome {
        SocketOutcome(sent: Platform.send(descriptor, bytes))
    }

    /// `writev` of the front of `buffer`, which drops what was sent.
    @inline(__always)
    func send(_ buffer: EventBuffer) -> SocketOutcome {
        SocketOutcome(sent: buffer.send(to: descriptor))
    }

    /// One wake-up's reading into `input`: reads of up to `LoopConnection.readChunk` bytes, at
    /// most `readsPerWakeUp` chunks' worth, while `input` holds less than `limit`, until the socket
    /// has no more (a read short of what it asked, or EAGAIN), the stream ends or a read fails.
    /// With `scratch`, the first read goes there and is copied to `input`
    /// (`LoopConnection.firstReadSize`). Inlined into the connection's read: this is the
    /// plaintext read of every wake-up.
    @inline(__always)
    func receive(
        into input: inout LoopBuffer, limit: Int, scratch: UnsafeMutableRawBufferPointer?
    ) -> ReceiveOutcome {
        var total = 0
        var budget = LoopConnection.readsPerWakeUp * LoopConnection.readChunk
        var useScratch = scratch != nil
        while true {
            let room = min(limit - input.count, budget)
            guard room > 0 else { return .stopped(total) }
            let asked: Int
            let outcome: SocketOutcome
            if useScratch, let scratch {
                useScratch = false
                asked = min(room, scratch.count)
                let space = UnsafeMutableRawBufferPointer(rebasing: scratch[..<asked])
                outcome = receive(into: space)
                if case .done(let count) = outcome {
                    input.withUnique { $0.append(UnsafeRawBufferPointer(rebasing: scratch[..<count])) }
                }
            } else {
                asked = min(room, LoopConnection.readChunk)
                outcome = input.withUnique { receive(into: $0, maxLength: asked) }
            }
            switch outcome {
            case .done(let count):
                total += count
                budget -= count
                // Short of what was asked: the socket has no more now, and another read would only
                // say so.
                if count < asked { return .drained(total) }
            case .wouldBlock: return .drained(total)
            case .endOfStream: return .ended(total)
            case .failed(let failure): return .failed(failure)
            }
        }
    }
}

/// A connection's transport: its socket as it is, or TLS over it. Loop thread only.
enum StreamTransport {
    case socket(SocketTransport)
    case tls(TLSTransport)

    /// One wake-up's receive into `connection`'s input while it holds less than `limit` (see
    /// `SocketTransport.receive(into:limit:scratch:)`; TLS: `LoopConnection+TLS.swift`).
    @inline(__always)
    func receive(
        limit: Int, scratch: UnsafeMutableRawBufferPointer?, for connection: LoopConnection
    ) -> ReceiveOutcome {
        switch self {
        case .socket(let socket): socket.receive(into: &connection.input, limit: limit, scratch: scratch)
        case .tls(let filter): connection.receive(through: filter, limit: limit)
        }
    }

    /// Takes `bytes` to write: sends what the socket takes now if `sendingNow`, and says what is
    /// left to queue.
    @inline(__always)
    func write(_ bytes: UnsafeRawBufferPointer, sendingNow: Bool, for connection: LoopConnection) -> WriteOutcome {
        switch self {
        case .socket(let socket):
            return sendingNow ? WriteOutcome(socket.send(bytes)) : .sent(0)
        case .tls(let filter):
            return connection.write(through: filter, bytes, sendingNow: sendingNow)
        }
    }

    /// Takes the bytes of `buffer` to write: sends what the socket takes now if `sendingNow`,
    /// dropping it from `buffer` (`sent`: the rest stays there), or empties `buffer` into bytes of
    /// the transport's own (`encoded`).
    @inline(__always)
    func write(_ buffer: EventBuffer, sendingNow: Bool, for connection: LoopConnection) -> WriteOutcome {
        switch self {
        case .socket(let socket):
            return sendingNow ? WriteOutcome(socket.send(buffer)) : .sent(0)
        case .tls(let filter):
            return connection.write(through: filter, buffer, sendingNow: sendingNow)
        }
    }

    /// This side's stream is about to end (`shutdownOutput()`, `close()`, or the peer's end
    /// without half-closure): the transport queues its own end first (TLS: close_notify, so that
    /// the peer reads it before the FIN).
    func outputWillEnd(for connection: LoopConnection) {
        guard case .tls(let filter) = self else { return }
        connection.closeNotify(through: filter)
    }

    /// Whether the transport is still setting up (a TLS handshake): a cancelled `connect` ends it.
    var isEstablishing: Bool {
        guard case .tls(let filter) = self else { return false }
        return filter.isHandshaking
    }

    /// The socket below the transport.
    var socket: SocketTransport {
        switch self {
        case .socket(let socket): socket
        case .tls(let filter): filter.socket
        }
    }
}

extension LoopConnection {
    /// The transport the connection's I/O goes through: its socket, or a TLS filter over it. Two
    /// inlined loads (no field of its own: an idle plaintext connection does not pay for it).
    /// Loop thread.
    var transport: StreamTransport {
        @inline(__always) get {
            if let filter = extrasSlot.load()?.filter.load() { return .tls(filter) }
            return .socket(SocketTransport(descriptor: fileDescriptor))
        }
    }
}
