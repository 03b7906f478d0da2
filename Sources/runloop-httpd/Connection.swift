import Glibc
import HTTPCore
import RunLoopKit

/// One client connection: a descriptor source, an idle timer, an input buffer parsed in place and
/// an output buffer written with one `send` per batch of responses.
///
/// The source watches `.readable` while the connection waits for requests and `.writable` only
/// while responses are queued (reading pauses meanwhile, so a client that does not read cannot
/// make the server buffer without bound). Used only on its worker's loop thread.
final class Connection {
    /// Read buffer size: twice the head limit, so a partial head (under 8 KiB) always leaves room.
    static let inputCapacity = 2 * HTTPRequestParser.defaultMaxHeadLength
    /// How long a closing connection waits for the client's end of file after the last response.
    static let lingerTime: Duration = .seconds(2)

    /// The mutable per-connection state. It lives behind a pointer rather than in stored `var`s,
    /// which would each cost a dynamic exclusivity check on every request.
    struct State {
        /// Index in the worker's connection list.
        var index: Int
        /// The events the source watches (kept here so that unchanged settings cost nothing).
        var watched: LoopDescriptorSource.Events = .readable
        var processor = HTTPRequestProcessor()
        /// CLOCK_MONOTONIC_COARSE of the last read or write; the idle timer checks it when it fires.
        var lastActivity: Int64
        /// The last response said `Connection: close`: close once the output is written.
        var closeAfterOutput = false
        /// Output done and write side shut down: reading and dropping until the client's end of file.
        var lingering = false
        /// The client shut down its side (read returned 0).
        var peerClosed = false
        var isOpen = true
    }

    /// The worker outlives its connections (it drops them as they close).
    unowned(unsafe) let worker: Worker
    let fd: Int32
    private let state: UnsafeMutablePointer<State>
    private let input = HTTPByteBuffer(capacity: Connection.inputCapacity)
    private let output = HTTPByteBuffer(capacity: 4096)
    private var source: LoopDescriptorSource?
    private var timer: LoopTimer?

    init(worker: Worker, fd: Int32, index: Int) {
        self.worker = worker
        self.fd = fd
        state = .allocate(capacity: 1)
        state.initialize(to: State(index: index, lastActivity: Socket.coarseNanoseconds()))
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Index in the worker's connection list.
    var index: Int {
        get { state.pointee.index }
        set { state.pointee.index = newValue }
    }

    /// Whether nothing is in flight: no partial request, no queued response, not closing.
    var isIdle: Bool {
        input.isEmpty && output.isEmpty && state.pointee.processor.isBetweenRequests && !state.pointee.lingering
    }

    func start() throws {
        let source = try LoopDescriptorSource(fileDescriptor: fd, events: .readable) { [self] _, events in
            handle(events)
        }
        self.source = source
        worker.loop.add(source, forMode: .default)
        // The idle timer is re-armed lazily: traffic only updates `lastActivity`, and the timer,
        // when it fires, either closes the connection or moves itself to the new deadline.
        let timer = LoopTimer(after: worker.idleTimeout) { [self] _ in idleTimerFired() }
        self.timer = timer
        worker.loop.add(timer, forMode: .default)
    }

    /// Stops watching, closes the descriptor and leaves the worker. Idempotent.
    func close() {
        guard state.pointee.isOpen else { return }
        state.pointee.isOpen = false
        source?.invalidate()  // before closing the descriptor
        timer?.invalidate()
        source = nil
        timer = nil
        Glibc.close(fd)
        worker.remove(self)
    }

    // MARK: Events

    private func handle(_ events: LoopDescriptorSource.Events) {
        guard state.pointee.isOpen else { return }
        if events.contains(.writable) {
            state.pointee.lastActivity = Socket.coarseNanoseconds()
            flush()
        } else if events.contains(.readable) {
            if state.pointee.lingering {
                discardInput()
            } else {
                readRequests()
            }
        }
    }

    private func readRequests() {
        let space = input.writableSpace
        guard space.count > 0 else {  // cannot happen: the parser rejects heads over half the buffer
            close()
            return
        }
        let count = recv(fd, space.baseAddress, space.count, 0)
        if count > 0 {
            input.commit(count)
            state.pointee.lastActivity = worker.tick()
            let outcome = state.pointee.processor.process(
                input.readableBytes, responses: worker.responses, into: output, allowKeepAlive: !worker.draining)
            if outcome.close {
                input.removeAll()
                state.pointee.closeAfterOutput = true
            } else {
                input.consume(outcome.consumed)
                input.compact()
            }
            flush()
        } else if count == 0 {
            state.pointee.peerClosed = true
            if output.isEmpty {
                close()
            } else {
                watch(.writable)
            }
        } else if errno != EAGAIN && errno != EINTR {
            close()
        }
    }

    /// Sends the queued responses with one `send`, then decides what to watch next.
    private func flush() {
        if !output.isEmpty {
            let bytes = output.readableBytes
            let sent = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if sent > 0 {
                output.consume(sent)
            } else if sent < 0 && errno != EAGAIN && errno != EINTR {
                close()
                return
            }
        }
        if !output.isEmpty {
            watch(.writable)
        } else if state.pointee.closeAfterOutput {
            startLingering()
        } else if state.pointee.peerClosed {
            close()
        } else {
            watch(.readable)
        }
    }

    /// After the last response: shut down the write side, then read and drop what the client still
    /// sends until its end of file (or the linger time), so that closing with unread input does
    /// not reset the connection before the client has read the response.
    private func startLingering() {
        shutdown(fd, Int32(SHUT_WR))
        state.pointee.lingering = true
        watch(.readable)
        timer?.fireDate = .now + min(Connection.lingerTime, worker.idleTimeout)
    }

    private func discardInput() {
        let count = recv(fd, worker.discardBuffer.baseAddress, worker.discardBuffer.count, 0)
        if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { close() }
    }

    @inline(__always)
    private func watch(_ events: LoopDescriptorSource.Events) {
        guard events != state.pointee.watched else { return }
        state.pointee.watched = events
        source?.events = events
    }

    private func idleTimerFired() {
        guard state.pointee.isOpen else { return }
        if state.pointee.lingering {
            close()
            return
        }
        let idle = Socket.coarseNanoseconds() - state.pointee.lastActivity
        if idle >= worker.idleTimeoutNanoseconds {
            close()
        } else {
            timer?.fireDate = .now + .nanoseconds(worker.idleTimeoutNanoseconds - idle)
        }
    }
}
