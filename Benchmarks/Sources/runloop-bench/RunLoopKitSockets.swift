import CRawPeer
import Dispatch
import RunLoopKit
import Synchronization

/// The socket workloads on RunLoopKit: a `LoopListener` on one `LoopThread`, client
/// `LoopConnection`s on another, through the public API only.
enum RunLoopKitSockets: SocketContender {
    enum Kind {
        case bulk, echo, idle
    }

    /// One run's bookkeeping. The server's fields are touched on the server loop only, the clients'
    /// on the client loop only; the two counts are atomic.
    final class Run: @unchecked Sendable {
        let kind: Kind
        let connections: Int
        let window: Int
        let accepted = Atomic<Int>(0)
        let connected = Atomic<Int>(0)
        let reached = DispatchSemaphore(value: 0)
        var start = 0.0
        var end = 0.0
        // Server loop.
        var servers: [LoopConnection] = []
        var received = 0
        // Client loop.
        var clients: [LoopConnection] = []
        var started = 0
        var sent = 0
        var completed = 0
        var finished = 0
        var times: [Double] = []
        // Set before the run.
        var bulkBytes = 0
        var chunk: [UInt8] = []
        var message: [UInt8] = []
        var roundTrips = 0

        init(kind: Kind, connections: Int, window: Int) {
            self.kind = kind
            self.connections = connections
            self.window = window
        }

        /// Idle: every connection is open on both sides.
        func checkOpen() {
            if kind == .idle, connected.load(ordering: .acquiring) == connections,
                accepted.load(ordering: .acquiring) == connections
            {
                reached.signal()
            }
        }

        /// Server loop: bulk bytes arrived.
        func received(_ count: Int) {
            received += count
            if received >= bulkBytes && end == 0 {
                end = monotonicSeconds()
                reached.signal()
            }
        }
    }

    static func bulk(bytes: Int, chunk: Int, timeout: Double) -> Outcome<Double> {
        let run = Run(kind: .bulk, connections: 1, window: 1)
        run.bulkBytes = bytes
        run.chunk = [UInt8](repeating: 0x78, count: chunk)
        return drive(run, timeout: timeout).map { _ in run.end - run.start }
    }

    static func echo(connections: Int, roundTrips: Int, message: Int, timeout: Double) -> Outcome<
        (seconds: Double, times: [Double])
    > {
        let run = Run(kind: .echo, connections: connections, window: connections)
        run.message = [UInt8](repeating: 0x6D, count: message)
        run.roundTrips = roundTrips
        if connections == 1 { run.times.reserveCapacity(roundTrips) }
        return drive(run, timeout: timeout).map { _ in (run.end - run.start, run.times) }
    }

    static func memoryPerConnection(count: Int, timeout: Double) -> Outcome<Double> {
        guard raw_raise_descriptor_limit() >= 2 * count + 64 else {
            return .failure(BenchError(reason: "fewer than \(2 * count + 64) descriptors allowed"))
        }
        let run = Run(kind: .idle, connections: count, window: 128)
        return drive(run, timeout: timeout, measuresMemory: true).map { Double($0) / Double(count) }
    }

    // MARK: The run

    /// Runs `run` with a server and its clients on two loop threads; with `measuresMemory`, the
    /// RSS growth from before the clients open to every connection open.
    private static func drive(_ run: Run, timeout: Double, measuresMemory: Bool = false) -> Outcome<Int> {
        let serverThread = LoopThread(name: "bench-tcp-server")
        let clientThread = LoopThread(name: "bench-tcp-client")
        defer { RunLoopKitContender.stop([clientThread, serverThread]) }
        let listener: LoopListener
        do {
            listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
                serve(connection, run)
            }
        } catch {
            return .failure(BenchError(reason: "cannot listen: \(error)"))
        }
        serverThread.loop.add(listener, forMode: .common)
        onLoop(serverThread.loop) {}  // the listener is in the loop's modes
        raw_malloc_trim()
        let before = residentBytes()
        onLoop(clientThread.loop) { connectMore(run, to: listener.localAddress, on: clientThread.loop) }
        let reached = run.reached.wait(timeout: .now() + timeout) == .success
        let delta = residentBytes() - before
        onLoop(clientThread.loop) {
            for connection in run.clients { connection.abort() }
            run.clients = []
        }
        onLoop(serverThread.loop) {
            listener.invalidate()
            for connection in run.servers { connection.abort() }
            run.servers = []
        }
        guard reached else { return .failure(.timedOut) }
        return .success(Int(delta))
    }

    /// Runs `body` on `loop`'s thread and waits for it (10 s at most).
    private static func onLoop(_ loop: Loop, _ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        loop.perform {
            body()
            done.signal()
        }
        _ = done.wait(timeout: .now() + 10)
    }

    /// Server loop: an accepted connection.
    private static func serve(_ connection: LoopConnection, _ run: Run) {
        guard run.servers.count < run.connections else { return connection.abort() }
        run.servers.append(connection)
        switch run.kind {
        case .echo:
            connection.onRead { connection, buffer in connection.write(&buffer) }
        case .bulk, .idle:
            connection.onRead { _, buffer in
                let count = buffer.count
                buffer.consume(count)
                run.received(count)
            }
        }
        run.accepted.add(1, ordering: .acquiringAndReleasing)
        run.checkOpen()
    }

    /// Client loop: starts connects, at most `window` in flight.
    private static func connectMore(_ run: Run, to address: SocketAddress, on loop: Loop) {
        while run.started < run.connections && run.started - run.connected.load(ordering: .relaxed) < run.window {
            run.started += 1
            LoopConnection.connect(to: address, on: loop, timeout: .seconds(30)) { result in
                // A failed connect leaves the run short: it times out.
                guard case .success(let connection) = result else { return }
                run.clients.append(connection)
                let last = run.connected.add(1, ordering: .acquiringAndReleasing).newValue == run.connections
                if last { run.start = monotonicSeconds() }
                switch run.kind {
                case .idle:
                    connection.onRead { _, _ in }
                    run.checkOpen()
                    connectMore(run, to: address, on: loop)
                case .bulk, .echo:
                    if last { for client in run.clients { begin(client, run) } }
                }
            }
        }
    }

    /// Client loop: the connection's traffic starts.
    private static func begin(_ connection: LoopConnection, _ run: Run) {
        if run.kind == .bulk {
            let fill = { (connection: LoopConnection) in
                while run.sent < run.bulkBytes && connection.isWritable {
                    connection.enqueue(run.chunk)
                    run.sent += run.chunk.count
                }
            }
            connection.onEvent(
                Loop.current.isolated { connection, event in
                    if event == .writable { fill(connection) }
                })
            fill(connection)
            return
        }
        var remaining = run.roundTrips
        var sentAt = monotonicSeconds()
        let size = run.message.count
        connection.onRead { connection, buffer in
            while buffer.count >= size {
                buffer.consume(size)
                let now = monotonicSeconds()
                if run.connections == 1 { run.times.append((now - sentAt) * 1e6) }
                run.completed += 1
                remaining -= 1
                if remaining > 0 {
                    sentAt = now
                    connection.enqueue(run.message)
                } else {
                    run.finished += 1
                    if run.finished == run.connections {
                        run.end = now
                        run.reached.signal()
                    }
                }
            }
        }
        connection.enqueue(run.message)
    }
}
