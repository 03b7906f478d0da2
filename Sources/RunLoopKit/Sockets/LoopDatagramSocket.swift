internal import CPlatform
import Glibc
import Synchronization

/// A datagram socket (UDP over IPv4 or IPv6, or a Unix-domain datagram socket) served by a loop:
/// datagrams are received on the loop's thread, several per wake-up (`recvmmsg`), and sent from
/// any thread through a bounded queue that the loop empties in batches (`sendmmsg`).
///
/// Every member may be called from any thread. Handlers run on the loop's thread, in the modes
/// the socket was added to, and count as handled sources; a loop keeps a socket it holds alive
/// until it is invalidated or removed from every mode, whether or not the caller kept it.
///
/// Receiving: each datagram goes to the oldest waiting ``receive()`` call, else to the
/// ``onReceive(_:)`` handler. While neither waits, nothing is read: datagrams wait in the
/// kernel's buffer (which drops what does not fit, as UDP does). A datagram longer than
/// ``maximumDatagramSize`` is not passed on cut short: it is counted (``truncatedDatagrams``) and
/// reported as a `LoopError` with `systemError` `EMSGSIZE`, to a waiting `receive()` (which
/// throws it) or to the ``onError(_:)`` handler.
///
/// Sending: `send(_:to:)` copies the datagram and returns at once. On the loop's thread, with
/// nothing queued, it goes to the kernel straight away; otherwise it joins the send queue, which
/// the loop empties in the order datagrams were queued (so each thread's order is kept), with one
/// `sendmmsg` for up to 64 of them. When the kernel's buffer is full (`EAGAIN`) they wait until
/// the socket is writable. Past ``sendQueueLimit`` datagrams queued, `send(_:to:)` drops new ones
/// and counts them (``droppedDatagrams``): datagrams may be lost, memory does not grow. The
/// awaiting `send(_:to:) async` is never dropped; it returns once the kernel took the datagram.
/// Failed sends of `send(_:to:)` (no route, a refused peer, a Unix path that does not exist) are
/// reported to `onError(_:)`.
///
/// Errors from the network: a socket connected with ``connect(to:)`` learns that its peer
/// refused (an ICMP port unreachable, or a Unix peer that has gone) as a `LoopError` with
/// `systemError` `ECONNREFUSED`, given to a waiting `receive()` or to `onError(_:)`, or thrown by
/// the next awaited send. An unconnected socket is not told (the kernel does not report it).
public final class LoopDatagramSocket: LoopResident, @unchecked Sendable {
    // @unchecked: the receive buffer below "Loop thread only" is touched on the loop's thread
    // only; the rest is immutable, atomic or guarded by `shared`.

    /// The address the socket is bound to: the real port when port 0 was asked for.
    ///
    /// Any thread.
    public let localAddress: SocketAddress

    /// The default ``sendQueueLimit``: 1,024 datagrams.
    public static let defaultSendQueueLimit = 1024

    /// The default ``maximumDatagramSize``: 9,216 bytes (a jumbo frame's payload; DNS, StatsD,
    /// syslog and QUIC datagrams fit).
    public static let defaultMaximumDatagramSize = 9216

    let fileDescriptor: Int32
    let family: Int32
    /// For a Unix socket: the path to remove when the socket is invalidated or released.
    private let unixPath: String?
    /// Set once, in `init`, before the item is shared.
    private var sourceSlot: LoopDescriptorSource! = nil
    var descriptorSource: LoopDescriptorSource { sourceSlot }

    typealias Datagram = (bytes: [UInt8], from: SocketAddress)
    typealias ReceiveHandler = (LoopDatagramSocket, [UInt8], SocketAddress) -> Void
    typealias ErrorHandler = (LoopDatagramSocket, LoopError) -> Void
    typealias Handlers = (ReceiveHandler?, ErrorHandler?)

    /// What any thread reads and writes under `shared`'s lock.
    struct Shared {
        var residency = Residency()
        var receiveHandler: ReceiveHandler?
        var errorHandler: ErrorHandler?
        /// Waiting `receive()` calls, oldest first (some may have been cancelled meanwhile).
        var receivers: [CancellableContinuation<Datagram>] = []
        /// Datagrams (or errors) read for `receive()` calls that were cancelled before they got
        /// them, or beyond those waiting: the next calls get them first. One batch at most.
        var held: [Result<Datagram, LoopError>] = []
        var outbox = Outbox()
        /// Datagrams of `send(_:to:)` queued and not sent yet (the batch being sent included).
        var queued = 0
        var sendQueueLimit = LoopDatagramSocket.defaultSendQueueLimit
        var maximumDatagramSize = LoopDatagramSocket.defaultMaximumDatagramSize
        /// Where the send queue is (`LoopDatagramSocket+State.swift`).
        var sendState = SendState.idle
        var remoteAddress: SocketAddress?
        /// Whether the socket is open (`ResidentLifecycle.swift`): the one answer of `isValid` and
        /// of every check of the socket's own.
        var lifecycle = ResidentLifecycle.open
    }

    /// Datagrams waiting to be sent: what `sendmmsg` takes, and beside each the awaiting call to
    /// resume (nil for `send(_:to:)`). The bytes are the queue's own (allocated), freed once sent.
    struct Outbox {
        var datagrams: [rlk_outgoing] = []
        var waiters: [CancellableContinuation<Void>?] = []
        /// The datagrams before `head` are done (sent or failed, freed). A queue the kernel takes
        /// a few datagrams at a time from (a Unix peer with a full receive queue) advances `head`
        /// instead of moving what is left, which would make draining it quadratic.
        var head = 0
        var isEmpty: Bool { head == datagrams.count }
        /// The indices of the datagrams not done yet.
        var pending: Range<Int> { head..<datagrams.count }

        mutating func append(_ datagram: rlk_outgoing, _ waiter: CancellableContinuation<Void>?) {
            datagrams.append(datagram)
            waiters.append(waiter)
        }

        /// Appends what `other` has not done yet, in its order.
        mutating func append(pendingOf other: Outbox) {
            datagrams += other.datagrams[other.pending]
            waiters += other.waiters[other.pending]
        }

        /// Marks the datagrams before `index` done; drops them from storage once they are the
        /// larger part, so each one is moved at most once more.
        mutating func markDone(upTo index: Int) {
            head = index
            if head == datagrams.count {
                removeAll()
            } else if head >= 64, head * 2 >= datagrams.count {
                datagrams.removeSubrange(..<head)
                waiters.removeSubrange(..<head)
                head = 0
            }
        }

        /// Empties the outbox, keeping its storage.
        mutating func removeAll() {
            datagrams.removeAll(keepingCapacity: true)
            waiters.removeAll(keepingCapacity: true)
            head = 0
        }
    }

    let shared: Locked<Shared>
    let dropped = Atomic<Int>(0)
    let truncated = Atomic<Int>(0)

    // MARK: Loop thread only

    /// Receive slots (`receiveSlots` of `receiveSlotSize` bytes) and what the kernel said of each
    /// datagram; allocated at the first receive, again when `maximumDatagramSize` changes.
    @exclusivity(unchecked) var receiveBuffer: UnsafeMutableRawPointer?
    @exclusivity(unchecked) var receiveSlotSize = 0
    @exclusivity(unchecked) var receiveSlots = 0
    @exclusivity(unchecked) var receivedInfo: UnsafeMutablePointer<rlk_received>?
    /// Whether datagrams of a batch are being handed out (`readable()`), and a nested run found
    /// the socket readable meanwhile.
    @exclusivity(unchecked) var delivery = DeliveryGuard.idle

    /// Binds a datagram socket to `address` now (so `localAddress` is known: port 0 gives a free
    /// port); it receives and sends once added to a loop.
    ///
    /// Any thread. With `reuseAddress`, an IP socket gets `SO_REUSEADDR` and `SO_REUSEPORT`
    /// (several sockets on one port, as multicast receivers use). A Unix socket's path must not
    /// exist yet; it is removed when the socket is invalidated, or released without being
    /// invalidated. Throws a `LoopError` with `systemError` set when a system call fails (for
    /// example `EADDRINUSE`, or `EADDRNOTAVAIL` for an address of no local interface).
    public init(bindingTo address: SocketAddress, reuseAddress: Bool = false) throws(LoopError) {
        let descriptor = try Platform.datagramSocket(bindingTo: address, reuseAddress: reuseAddress)
        fileDescriptor = descriptor
        family = address.family
        localAddress = Platform.address(of: descriptor) ?? address
        unixPath = address.unixPath
        shared = Locked(Shared())
        // Nothing is watched until a handler or a `receive()` wants datagrams, or sends wait.
        sourceSlot = LoopDescriptorSource(client: descriptor, events: [])
    }

    deinit {
        descriptorSource.invalidate()
        finish()
        receiveBuffer?.deallocate()
        receivedInfo?.deallocate()
    }

    // MARK: Handlers

    /// Sets the handler that gets each datagram received (when no `receive()` call waits for
    /// it), with its sender's address. Datagrams are read only while a handler is set or a
    /// `receive()` waits.
    ///
    /// Any thread; the handler runs on the loop's thread in the socket's modes and replaces an
    /// earlier one. Datagrams read for `receive()` calls that were cancelled are given to it
    /// soon after. It is released when the socket is invalidated.
    public func onReceive(_ handler: sending @escaping (LoopDatagramSocket, [UInt8], SocketAddress) -> Void) {
        let (replaced, loop) = shared.withLock { shared in
            defer { shared.receiveHandler = handler }
            return (shared.receiveHandler, shared.lifecycle.isOpen ? shared.residency.loop : nil)
        }
        withExtendedLifetime(replaced) {}
        updateInterest()
        if let loop { hop(to: loop) { self.deliverHeld() } }
    }

    /// Sets the handler told of what goes wrong off any awaiting call: a datagram truncated
    /// (`systemError` `EMSGSIZE`), a refusal on a connected socket (`ECONNREFUSED`), and each
    /// `send(_:to:)` that failed (the message names the destination; the datagram is dropped).
    ///
    /// Any thread; the handler runs on the loop's thread in the socket's modes and replaces an
    /// earlier one. Errors with no handler to tell are dropped (truncations are still counted).
    public func onError(_ handler: sending @escaping (LoopDatagramSocket, LoopError) -> Void) {
        let replaced = shared.withLock { shared in
            defer { shared.errorHandler = handler }
            return shared.errorHandler
        }
        withExtendedLifetime(replaced) {}
    }

    // MARK: State

    /// Whether the socket is still open (not invalidated).
    ///
    /// Any thread.
    public var isValid: Bool { shared.withLock { $0.lifecycle.isOpen } }

    /// The peer given to ``connect(to:)``, if the socket is connected.
    ///
    /// Any thread.
    public var remoteAddress: SocketAddress? { shared.withLock { $0.remoteAddress } }

    /// Datagrams of `send(_:to:)` dropped because ``sendQueueLimit`` datagrams were queued.
    ///
    /// Any thread; the count may be stale by the time it is read.
    public var droppedDatagrams: Int { dropped.load(ordering: .relaxed) }

    /// Datagrams received that were longer than ``maximumDatagramSize`` and so were not passed
    /// on (each was reported, see ``onError(_:)``).
    ///
    /// Any thread; the count may be stale by the time it is read.
    public var truncatedDatagrams: Int { truncated.load(ordering: .relaxed) }

    /// Datagrams of `send(_:to:)` queued and not sent yet.
    ///
    /// Any thread; the count may be stale by the time it is read.
    public var queuedDatagrams: Int { shared.withLock { $0.queued } }

    /// How many datagrams of `send(_:to:)` may wait in the send queue before new ones are dropped
    /// (``droppedDatagrams``); by default ``defaultSendQueueLimit``. Awaited sends do not count.
    ///
    /// Any thread. Less than 1 is a programmer error.
    public var sendQueueLimit: Int {
        get { shared.withLock { $0.sendQueueLimit } }
        set {
            precondition(newValue >= 1, "RunLoopKit: sendQueueLimit must be at least 1, not \(newValue)")
            shared.withLock { $0.sendQueueLimit = newValue }
        }
    }

    /// The longest datagram received whole, in bytes; a longer one is reported as truncated. By
    /// default ``defaultMaximumDatagramSize``. The socket reads up to 32 datagrams per system call
    /// into a buffer of up to 32 such slots (at most 1 MiB), allocated at the first receive.
    ///
    /// Any thread; it applies from the next read. Outside 1...65,536 is a programmer error.
    public var maximumDatagramSize: Int {
        get { shared.withLock { $0.maximumDatagramSize } }
        set {
            precondition(
                (1...65536).contains(newValue),
                "RunLoopKit: maximumDatagramSize must be in 1...65536, not \(newValue)")
            shared.withLock { $0.maximumDatagramSize = newValue }
        }
    }

    /// Sets the kernel's receive buffer (`SO_RCVBUF`; the kernel doubles it and caps it at
    /// `net.core.rmem_max`): room for a burst of datagrams between two wake-ups.
    ///
    /// Any thread. Throws a `LoopError` with `systemError` set if the kernel refuses, or once the
    /// socket is invalidated.
    public func setReceiveBufferSize(_ bytes: Int) throws(LoopError) {
        try checkValid()
        try Platform.setBufferSize(fileDescriptor, receive: true, bytes).get(failing: "setsockopt(SO_RCVBUF)")
    }

    // MARK: Connecting

    /// Connects the socket to `address`: from then on only datagrams from `address` are
    /// received, and a refusal by it (an ICMP port unreachable for UDP; a Unix peer that has gone)
    /// is reported as a `LoopError` with `systemError` `ECONNREFUSED` (see the type's notes).
    /// Sends may still name any address.
    ///
    /// Any thread. Throws a `LoopError` for an address of another family than the socket's, once
    /// the socket is invalidated, or with `systemError` set when `connect` fails.
    public func connect(to address: SocketAddress) throws(LoopError) {
        try checkValid()
        try checkFamily(of: address, for: "connect to")
        try Platform.connectDatagram(fileDescriptor, to: address).get(failing: "connect(\(address))")
        shared.withLock { $0.remoteAddress = address }
    }

    // MARK: Invalidation

    /// Closes the socket: removes it from its loop, ends waiting `receive()` and awaited sends
    /// with a `LoopError`, drops the send queue, releases the handlers and, for a Unix socket,
    /// removes its path.
    ///
    /// Any thread, including from its own handlers.
    public func invalidate() {
        // Invalid from here on, before the source closes the descriptor.
        shared.withLock { $0.lifecycle.invalidationBegan() }
        descriptorSource.invalidate()
        // The source tells a socket it holds (one in a loop); this covers one in no loop.
        descriptorSourceInvalidated()
    }

    func descriptorSourceInvalidated() {
        finish()
        leaveLoop()
    }

    /// What `receive()` and the awaited `send` throw before the socket is in a loop.
    var notInALoopError: LoopError {
        LoopError("the datagram socket bound to \(localAddress) is in no loop: add it to a loop's mode first")
    }

    /// What ends waiting calls once the socket is invalidated.
    var invalidatedError: LoopError { LoopError("the datagram socket bound to \(localAddress) is invalidated") }

    /// Lets go, once, of the queue, the waiters, the handlers and the Unix path.
    private func finish() {
        let taken = shared.withLock { shared -> ([CancellableContinuation<Datagram>], Outbox, Handlers)? in
            guard shared.lifecycle.finish() else { return nil }
            defer {
                shared.receivers = []
                shared.held = []
                shared.outbox = Outbox()
                shared.queued = 0
                shared.receiveHandler = nil
                shared.errorHandler = nil
            }
            return (shared.receivers, shared.outbox, (shared.receiveHandler, shared.errorHandler))
        }
        guard let (receivers, outbox, handlers) = taken else { return }
        // Released after the lock: a handler's captures may call back into the socket as they go.
        withExtendedLifetime(handlers) {}
        let error = invalidatedError
        for receiver in receivers { receiver.resume(with: .failure(error)) }
        for index in outbox.pending {
            free(UnsafeMutableRawPointer(mutating: outbox.datagrams[index].bytes))
            outbox.waiters[index]?.resume(with: .failure(error))
        }
        if let unixPath { Platform.removePath(unixPath) }
    }

    // MARK: Loop machinery

    func withResidency<R>(_ body: (inout Residency) -> R) -> R { shared.withLock { body(&$0.residency) } }

    func descriptorReady(_ events: LoopDescriptorSource.Events) {
        if events.contains(.writable) { writable() }
        if events.contains(.readable) { readable() }
    }

    /// The socket joined a loop: datagrams queued before are sent, and reading starts if wanted.
    func joinedLoop() {
        let loop = shared.withLock { shared -> Loop? in
            guard !shared.outbox.isEmpty else { return nil }
            let loop = shared.residency.loop
            guard shared.sendState.datagramsWaiting(inLoop: loop != nil) == .postFlush else { return nil }
            return loop
        }
        if let loop { hop(to: loop) { self.flush() } }
        updateInterest()
    }

    /// Watches for what the socket needs now: readable while a handler is set or a `receive()`
    /// waits (and nothing read waits in `held`), writable while the send queue waits for room.
    func updateInterest() {
        let events = shared.withLock { shared -> LoopDescriptorSource.Events in
            shared.receivers.removeAll { !$0.isWaiting }
            var events: LoopDescriptorSource.Events = []
            if shared.receiveHandler != nil || (!shared.receivers.isEmpty && shared.held.isEmpty) {
                events.insert(.readable)
            }
            if shared.sendState.wantsWritable { events.insert(.writable) }
            return events
        }
        descriptorSource.events = events
    }

    /// Throws once the socket is invalidated (its descriptor is closed, or about to be).
    func checkValid() throws(LoopError) {
        guard isValid else { throw invalidatedError }
    }

    /// Checks that `address` is of the socket's family.
    func checkFamily(of address: SocketAddress, for action: String) throws(LoopError) {
        guard address.family != family else { return }
        throw LoopError(
            "cannot \(action) \(address) from the \(SocketAddress.familyName(family)) socket bound to \(localAddress): the address is \(SocketAddress.familyName(address.family))",
            systemError: EAFNOSUPPORT)
    }

    /// Tells the error handler of `error`, on the loop's thread, in the socket's modes.
    func report(_ error: LoopError) {
        guard let loop = shared.withLock({ $0.lifecycle.isOpen ? $0.residency.loop : nil }) else { return }
        hop(to: loop) {
            guard let handler = self.shared.withLock({ $0.errorHandler }) else { return }
            handler(self, error)
        }
    }
}
