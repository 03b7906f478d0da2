import Glibc
import HTTPCore
import RunLoopKit
import Synchronization

/// What every worker shares: the options and the count of open connections.
final class ServerShared: Sendable {
    let options: ServerOptions
    let openConnections = Atomic<Int>(0)

    init(options: ServerOptions) {
        self.options = options
    }
}

/// One event loop's share of the server: its own listening socket (SO_REUSEPORT: the kernel
/// spreads connections over the listeners), its connections, its response table.
///
/// Created and used only on its loop's thread.
final class Worker {
    let loop: Loop
    let shared: ServerShared
    let idleTimeout: Duration
    let idleTimeoutNanoseconds: Int64
    /// Prepared responses; their Date field is refreshed when the second changes.
    let responses: HTTPResponseTable
    /// Where lingering connections drop what they read.
    let discardBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
    /// The CLOCK_MONOTONIC_COARSE second at which the Date of `responses` was last checked (behind
    /// a pointer: no exclusivity check on the hot path).
    private let dateCheckedSecond = UnsafeMutablePointer<Int64>.allocate(capacity: 1)

    private var listener: Int32
    private var listenerSource: LoopDescriptorSource?
    /// A descriptor kept in reserve: when accept fails with EMFILE, it is closed to accept and drop
    /// the connection, so that the listener does not stay readable forever.
    private var spareDescriptor: Int32
    /// The open connections; each knows its index here (removal swaps the last one in).
    private var connections: [Connection] = []
    /// Set by `beginDrain`: no more accepting, no more keep-alive.
    private(set) var draining = false
    private var onDrained: (@Sendable () -> Void)?

    init(loop: Loop, listener: Int32, shared: ServerShared) {
        self.loop = loop
        self.listener = listener
        self.shared = shared
        idleTimeout = shared.options.idleTimeout
        let (seconds, attoseconds) = idleTimeout.components
        idleTimeoutNanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        responses = HTTPResponseTable(epochSeconds: Socket.wallClockSeconds())
        spareDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        dateCheckedSecond.initialize(to: 0)
    }

    deinit {
        discardBuffer.deallocate()
        dateCheckedSecond.deallocate()
    }

    /// Starts accepting on the listener.
    func start() throws {
        let source = try LoopDescriptorSource(fileDescriptor: listener, events: .readable) { [self] _, _ in
            acceptConnections()
        }
        listenerSource = source
        loop.add(source, forMode: .default)
    }

    /// Reads the clock for a batch of requests: returns CLOCK_MONOTONIC_COARSE in nanoseconds and,
    /// when its second has changed, refreshes the Date of the prepared responses from the wall clock.
    /// One clock read per batch, two once a second; the Date shown is at most a second behind.
    @inline(__always)
    func tick() -> Int64 {
        let now = Socket.coarseNanoseconds()
        let second = now / 1_000_000_000
        if second != dateCheckedSecond.pointee {
            dateCheckedSecond.pointee = second
            responses.updateDate(epochSeconds: Socket.wallClockSeconds())
        }
        return now
    }

    // MARK: Accepting

    private func acceptConnections() {
        let maxConnections = shared.options.maxConnections
        for _ in 0..<64 {
            // accept4 is a GNU extension that Swift's Glibc module does not declare: accept, then
            // make the socket non-blocking (it does not inherit that from the listener).
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED:
                    continue
                case EMFILE, ENFILE:
                    dropOneConnection()
                    return
                default:  // EAGAIN: nothing more to accept
                    return
                }
            }
            // Over the limit: accept and close at once, so the client learns it now.
            if shared.openConnections.add(1, ordering: .relaxed).newValue > maxConnections {
                shared.openConnections.subtract(1, ordering: .relaxed)
                close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let connection = Connection(worker: self, fd: fd, index: connections.count)
            connections.append(connection)
            do {
                try connection.start()
            } catch {
                connection.close()
            }
        }
    }

    private func dropOneConnection() {
        guard spareDescriptor >= 0 else { return }
        close(spareDescriptor)
        let fd = accept(listener, nil, nil)
        if fd >= 0 { close(fd) }
        spareDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// Called by a connection as it closes.
    func remove(_ connection: Connection) {
        let index = connection.index
        let last = connections.removeLast()
        if last !== connection {
            connections[index] = last
            last.index = index
        }
        shared.openConnections.subtract(1, ordering: .relaxed)
        if draining && connections.isEmpty { finishDrain() }
    }

    // MARK: Shutting down

    /// Stops accepting, closes the connections with nothing in flight and lets the others finish
    /// their responses (with `Connection: close`); calls `onDrained` once none is left.
    func beginDrain(onDrained: @escaping @Sendable () -> Void) {
        guard !draining else { return }
        draining = true
        self.onDrained = onDrained
        listenerSource?.invalidate()
        listenerSource = nil
        close(listener)
        listener = -1
        for connection in connections where connection.isIdle {
            connection.close()
        }
        if connections.isEmpty { finishDrain() }
    }

    private func finishDrain() {
        let done = onDrained
        onDrained = nil
        done?()
    }
}

/// Lets other threads name a loop's worker; only ever touched on that loop's thread.
final class WorkerSlot: @unchecked Sendable {
    var worker: Worker?
}
