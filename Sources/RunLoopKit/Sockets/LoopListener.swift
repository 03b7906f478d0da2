import Glibc
import Synchronization

/// A listening stream socket (TCP over IPv4 or IPv6, or Unix-domain) that accepts connections on
/// the thread of the loop it is added to.
///
/// Every member may be called from any thread; the accept handler runs on the loop's thread, in
/// the listener's modes, and counts as a handled source. The listener accepts up to 64
/// connections per wake-up (`accept4`, non-blocking and close-on-exec); each starts on the
/// listener's loop in the listener's modes and is handed to the handler, which sets its read and
/// event handlers. When the process runs out of descriptors (`EMFILE`, `ENFILE`) the listener
/// closes a descriptor it keeps in reserve, accepts the waiting connection and closes it at once
/// (the client sees the connection end instead of waiting), then takes its reserve again; with no
/// reserve it stops accepting for 100 ms. Either way the loop does not spin on a listening socket
/// that stays ready. Each connection shed so is counted (``shedConnections``, and the loop's
/// `LoopMetrics.shedConnections`) and reported to the ``onShed(_:)`` handler.
///
/// A loop keeps a listener it holds alive until it is invalidated or removed from every mode.
public final class LoopListener: LoopResident, @unchecked Sendable {
    // @unchecked: `accept` is called on the loop's thread only; the rest is immutable or locked.

    /// The address the socket is bound to: the real port when port 0 was asked for.
    ///
    /// Any thread.
    public let localAddress: SocketAddress

    private let accept: (LoopConnection) -> Void
    /// A listener made without a handler: the connections waiting for `connections`' consumers
    /// (`LoopListener+Connections.swift`).
    let incoming: IncomingConnections?
    /// What any thread reads and writes under one lock.
    private struct Shared {
        var residency = Residency()
        /// Whether the listener is open (`ResidentLifecycle.swift`): the one answer of `isValid`
        /// and of whether its reserve, path and handler were let go.
        var lifecycle = ResidentLifecycle.open
        /// Told of each connection shed, on the loop's thread.
        var shedHandler: ((LoopListener, LoopError) -> Void)?
    }
    private let shared = Locked(Shared())
    /// Set once, in `init`, before the item is shared.
    private var sourceSlot: LoopDescriptorSource! = nil
    var descriptorSource: LoopDescriptorSource { sourceSlot }
    /// A descriptor held open to be given up when accept runs out of descriptors, or -1.
    private let reserve = Atomic<Int32>(-1)
    /// For a Unix socket: the path to remove when the listener is invalidated.
    private let unixPath: String?
    /// Connections accepted and closed at once for want of descriptors.
    private let shed = Atomic<Int>(0)

    /// How long accepting pauses when descriptors ran out and no reserve was left.
    static let exhaustionBackoff: Duration = .milliseconds(100)
    /// Connections accepted per wake-up, at most: a flood of them leaves the loop's other items
    /// their turn.
    static let acceptBatch = 64

    /// Binds a listening socket to `address` now (so `localAddress` is known) with room for
    /// `backlog` connections not yet accepted; it accepts once added to a loop.
    ///
    /// Any thread. TCP sockets get `SO_REUSEADDR`, and `SO_REUSEPORT` with `reusePort` (several
    /// listeners on one port, among which the kernel spreads connections). A Unix socket's path
    /// must not exist yet; it is removed when the listener is invalidated, or released without
    /// being invalidated. Throws a `LoopError`
    /// with `systemError` set when a system call fails (for example `EADDRINUSE`); a negative
    /// backlog is a programmer error.
    public init(
        address: SocketAddress, backlog: Int = 1024, reusePort: Bool = false,
        _ accept: sending @escaping (LoopConnection) -> Void
    ) throws(LoopError) {
        precondition(backlog >= 0, "RunLoopKit: LoopListener needs a backlog of 0 or more, not \(backlog)")
        let descriptor = try Platform.listeningSocket(on: address, backlog: backlog, reusePort: reusePort)
        localAddress = Platform.address(of: descriptor) ?? address
        unixPath = address.unixPath
        self.accept = accept
        incoming = nil
        serve(descriptor)
    }

    /// Binds a listening socket as the init above does, for async code: with no handler, the
    /// connections it accepts wait for ``connections``' consumers, and accepting pauses while 64
    /// wait unconsumed.
    ///
    /// Any thread. Throws as the init above.
    public init(address: SocketAddress, backlog: Int = 1024, reusePort: Bool = false) throws(LoopError) {
        precondition(backlog >= 0, "RunLoopKit: LoopListener needs a backlog of 0 or more, not \(backlog)")
        let descriptor = try Platform.listeningSocket(on: address, backlog: backlog, reusePort: reusePort)
        localAddress = Platform.address(of: descriptor) ?? address
        unixPath = address.unixPath
        let incoming = IncomingConnections()
        accept = { incoming.deliver($0) }
        self.incoming = incoming
        serve(descriptor)
        incoming.attach(to: self)
    }

    /// A listener over `descriptor`, a listening socket `Platform.adoptListeningSocket` readied
    /// (`LoopListener+Adopting.swift`). A Unix socket's path is not the listener's: it stays.
    init(adopted descriptor: Int32, _ accept: sending @escaping (LoopConnection) -> Void) throws(LoopError) {
        guard let address = Platform.address(of: descriptor) else {
            throw LoopError("the address of descriptor \(descriptor) cannot be read", systemError: EINVAL)
        }
        localAddress = address
        unixPath = nil
        self.accept = accept
        incoming = nil
        serve(descriptor)
    }

    /// Takes `descriptor`, a listening socket, and a reserve descriptor: the last step of an init.
    private func serve(_ descriptor: Int32) {
        reserve.store((try? Platform.openPlaceholderDescriptor().get()) ?? -1, ordering: .relaxed)
        sourceSlot = LoopDescriptorSource(client: descriptor, events: .readable)
    }

    deinit {
        descriptorSource.invalidate()
        // Released without `invalidate()` (never added, or removed from every mode): the source
        // no longer reaches this listener, so its path goes here. Not after an invalidation, which
        // removed it already (a later listener may have bound the path since).
        if shared.withLock({ $0.lifecycle.finish() }), let unixPath {
            Platform.removePath(unixPath)
        }
        closeReserve()
        incoming?.end()
    }

    /// Whether the listener is still listening (not invalidated).
    ///
    /// Any thread.
    public var isValid: Bool { shared.withLock { $0.lifecycle.isOpen } }

    /// How many connections the listener has shed: accepted and closed at once because the
    /// process had run out of descriptors (`EMFILE`, `ENFILE`), their clients seeing the
    /// connection end. A server that sees it grow holds too many descriptors for its limit
    /// (`ulimit -n`): it can close idle connections, or raise the limit.
    ///
    /// Any thread; the count may be stale by the time it is read.
    public var shedConnections: Int { shed.load(ordering: .relaxed) }

    /// Sets the handler told of each connection the listener sheds (see ``shedConnections``),
    /// with a `LoopError` whose `systemError` is the accept's error (`EMFILE` when the process's
    /// limit is reached, `ENFILE` for the system's, `ENOBUFS` or `ENOMEM` when the kernel is short
    /// of memory) and whose message names the client. By the time it runs the connection is closed
    /// and the listener has taken its reserve descriptor again.
    ///
    /// Any thread; the handler runs on the loop's thread, in the listener's modes, and replaces an
    /// earlier one. Connections shed before it is set are counted, not reported. It is released
    /// when the listener is invalidated.
    public func onShed(_ handler: sending @escaping (LoopListener, LoopError) -> Void) {
        // A replaced handler goes after the lock: its captures may call back into the listener.
        let replaced = shared.withLock { shared in
            defer { shared.shedHandler = handler }
            return shared.shedHandler
        }
        withExtendedLifetime(replaced) {}
    }

    /// Stops listening: removes the listener from its loop, closes the socket (once libevent has
    /// let go of it) and, for a Unix socket, removes its path. Connections it accepted go on.
    ///
    /// Any thread, including from the accept handler.
    public func invalidate() {
        // Invalid from here on, before the source closes the descriptor.
        shared.withLock { $0.lifecycle.invalidationBegan() }
        descriptorSource.invalidate()
        // The source tells a listener it holds (one in a loop); this covers one in no loop.
        descriptorSourceInvalidated()
    }

    func withResidency<R>(_ body: (inout Residency) -> R) -> R { shared.withLock { body(&$0.residency) } }

    func descriptorReady(_ events: LoopDescriptorSource.Events) {
        acceptBatch(descriptorSource.fileDescriptor)
    }

    func descriptorSourceInvalidated() {
        // Once: a later listener may have bound the same Unix path by the time of a second call.
        let handler = shared.withLock { shared -> ((LoopListener, LoopError) -> Void)?? in
            guard shared.lifecycle.finish() else { return nil }
            return .some(shared.shedHandler.take())
        }
        guard let handler else { return }
        incoming?.end()
        closeReserve()
        if let unixPath { Platform.removePath(unixPath) }
        // Released after the lock, like a replaced one: a handler that captured the listener
        // would otherwise keep it alive for good.
        withExtendedLifetime(handler) {}
        leaveLoop()
    }

    private func closeReserve() {
        let descriptor = reserve.exchange(-1, ordering: .acquiringAndReleasing)
        if descriptor >= 0 { Platform.closeDescriptor(descriptor) }
    }

    /// Takes a reserve descriptor again if the listener has none; false if none could be opened.
    /// A listener invalidated meanwhile, from another thread, lets it go at once.
    private func retakeReserve() -> Bool {
        guard reserve.load(ordering: .acquiring) < 0 else { return true }
        guard case .success(let again) = Platform.openPlaceholderDescriptor() else { return false }
        if !reserve.compareExchange(expected: -1, desired: again, ordering: .acquiringAndReleasing).exchanged {
            Platform.closeDescriptor(again)
        } else if !isValid {
            // Finished since the look above: its reserve was closed before this one was stored.
            closeReserve()
        }
        return true
    }

    // MARK: Accepting (loop thread)

    private func acceptBatch(_ listener: Int32) {
        guard let loop = withResidency({ $0.loop }) else { return }
        for _ in 0..<LoopListener.acceptBatch {
            let descriptor: Int32
            let remote: SocketAddress
            switch Platform.accept(listener) {
            case .success(let accepted):
                (descriptor, remote) = accepted
            case .failure(let failure):
                switch failure.code {
                case ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM: outOfDescriptors(listener, failure, loop)
                default: break  // EAGAIN: accepted everything waiting
                }
                return
            }
            Platform.disableNagle(descriptor, for: remote)
            // The connection shares the listener's list of modes (no copy of its own).
            let modes = withResidency { $0.modes }
            let connection = LoopConnection(
                accepted: descriptor, local: Platform.address(of: descriptor) ?? localAddress, remote: remote,
                loop: loop, modes: modes)
            for mode in modes { loop.add(connection, forMode: mode) }
            accept(connection)
            // A handler-less listener stops at 64 connections waiting for their consumers.
            guard isValid, incoming?.isFull != true else { return }
        }
    }

    /// Out of descriptors (`accept` failed with `failure`): shed one waiting connection with the
    /// reserve, or pause accepting.
    private func outOfDescriptors(_ listener: Int32, _ failure: Errno, _ loop: Loop) {
        let spare = reserve.exchange(-1, ordering: .acquiringAndReleasing)
        if spare >= 0 {
            Platform.closeDescriptor(spare)
            let accepted = try? Platform.accept(listener).get()
            if let accepted {
                // Counted before the close: a client that sees its connection end finds it counted.
                shed.add(1, ordering: .relaxed)
                loop.recordShedConnection()
                Platform.closeDescriptor(accepted.descriptor)
            }
            let heldAgain = retakeReserve()
            if let accepted { reportShed(failure, accepted.peer) }
            if heldAgain { return }
        }
        pauseAccepting()
    }

    private func reportShed(_ failure: Errno, _ peer: SocketAddress) {
        guard let handler = shared.withLock({ $0.shedHandler }) else { return }
        let error = LoopError.systemCall("accept", failedWith: failure)
        handler(
            self,
            LoopError(
                "the connection from \(peer) was shed (accepted and closed at once): \(error.message)",
                systemError: failure.code))
    }

    private func pauseAccepting() {
        guard let loop = withResidency({ $0.loop }) else { return }
        descriptorSource.events = []
        let resume = LoopTimer(after: LoopListener.exhaustionBackoff) { [weak self] _ in
            guard let self else { return }
            _ = retakeReserve()
            descriptorSource.events = .readable
        }
        loop.attach(resume, to: self)
    }
}
