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

/// One event loop's share of the server: its own listener (`reusePort`: the kernel spreads
/// connections over the listeners), its sessions, its prepared responses.
///
/// Made on the main thread, then used only on its loop's thread (by the handlers of its listener,
/// its connections and its drain source): the handlers reach it through a `LoopBound`, which
/// checks that.
final class Worker {
    /// The mode a draining worker runs: it holds the connections with a request under way, not
    /// the listener nor the idle connections.
    static let drainMode: Loop.Mode = "runloop-httpd.draining"

    let loop: Loop
    let shared: ServerShared
    let idleTimeout: Duration
    /// Prepared responses; their Date field is refreshed when the second changes.
    let responses: HTTPResponseTable
    /// The CLOCK_MONOTONIC_COARSE second at which the Date of `responses` was last checked.
    private var dateCheckedSecond = 0
    private var sessions: [ObjectIdentifier: Session] = [:]
    /// Set by `drain`: no more accepting, no more keep-alive.
    private(set) var isDraining = false

    init(loop: Loop, shared: ServerShared) {
        self.loop = loop
        self.shared = shared
        idleTimeout = shared.options.idleTimeout
        responses = HTTPResponseTable(epochSeconds: Worker.seconds(CLOCK_REALTIME_COARSE))
    }

    /// Binds a listener for `worker` to `address` (HTTPS with `tls`) and adds it to the worker's
    /// loop. The listener's handler holds the worker until the listener is invalidated, when the
    /// worker drains.
    static func listen(_ worker: LoopBound<Worker>, on address: SocketAddress, tls: TLSConfiguration?) throws(LoopError)
        -> LoopListener
    {
        let accept = { @Sendable (connection: LoopConnection) in worker.value.accepted(connection) }
        let listener: LoopListener
        if let tls {
            listener = try LoopListener(address: address, tls: tls, backlog: 4096, reusePort: true, accept)
        } else {
            listener = try LoopListener(address: address, backlog: 4096, reusePort: true, accept)
        }
        worker.loop.add(listener, forMode: .default)
        return listener
    }

    /// Refreshes the Date of the prepared responses when the second has changed: one clock read
    /// (no system call) per batch of requests; the Date shown is at most a second behind.
    func tick() {
        let second = Worker.seconds(CLOCK_MONOTONIC_COARSE)
        guard second != dateCheckedSecond else { return }
        dateCheckedSecond = second
        responses.updateDate(epochSeconds: Worker.seconds(CLOCK_REALTIME_COARSE))
    }

    private static func seconds(_ clock: clockid_t) -> Int {
        var now = timespec()
        clock_gettime(clock, &now)
        return now.tv_sec
    }

    // MARK: Connections

    fileprivate func accepted(_ connection: LoopConnection) {
        // Over the limit: closed at once, so the client learns it now.
        guard shared.openConnections.add(1, ordering: .relaxed).newValue <= shared.options.maxConnections else {
            shared.openConnections.subtract(1, ordering: .relaxed)
            connection.close()
            return
        }
        let session = Session(connection: connection, worker: self)
        sessions[ObjectIdentifier(session)] = session
        session.start()
    }

    /// Called by a session once its connection has closed.
    func sessionClosed(_ session: Session) {
        guard sessions.removeValue(forKey: ObjectIdentifier(session)) != nil else { return }
        shared.openConnections.subtract(1, ordering: .relaxed)
    }

    // MARK: Shutting down

    /// Closes the connections with nothing under way and serves only the others,
    /// in `drainMode`, until they are done (their responses say `Connection: close`) or
    /// `deadline` passes. Runs the loop nested, from the handler of the drain source.
    func drain(until deadline: ContinuousClock.Instant) {
        guard !isDraining else { return }
        isDraining = true
        for session in Array(sessions.values) { session.drain(keepingIn: Worker.drainMode) }
        // A connection that closes leaves every mode: the run finds the mode empty and returns.
        while !sessions.isEmpty && ContinuousClock.now < deadline
            && loop.run(mode: Worker.drainMode, until: deadline)
        {}
    }
}
