import Synchronization

/// A typed message port (CFRunLoop's version 1 source): any thread sends, and the loop delivers the
/// messages in order on its own thread, in the modes that hold the port.
///
/// Delivering messages counts as a handled source. A port keeps its modes alive even with no
/// traffic, so the keep-alive pattern `loop.add(port, forMode: .default)` works (on Foundation on
/// Linux, `add(Port())` traps). A port belongs to one loop, which keeps it (and its handler) alive
/// while it is in one of the loop's modes, whether or not the caller keeps a reference.
///
/// Messages are stored by value in chunks the port reuses: once a steady stream has as many as
/// it needs, a port whose `Message` holds no references allocates nothing per message.
public final class LoopPort<Message: Sendable>: @unchecked Sendable {
    /// Messages sent and not yet delivered: the ones sent since the loop last took them, and the
    /// batch the loop is delivering.
    ///
    /// Senders append to `incoming` under `word`; the loop takes them all at once by trading
    /// chunks with `batch`, its own, which it delivers from without the lock. The chunks a
    /// delivery empties go back to the senders with the next take, so a steady stream allocates
    /// nothing.
    ///
    /// A message's path (`append`, the loop of `deliver`) is inlinable, so that it is compiled in
    /// the caller's module for its `Message`: a struct is copied with plain moves, where generic
    /// code calls the type's value witnesses for every copy, move and destruction. What happens
    /// once per batch (taking the messages, signalling, instruments) is not.
    @usableFromInline
    final class Mailbox: @unchecked Sendable {
        // Groups of fields, each on cache lines of its own (64 bytes of padding between them): the
        // senders write the second group with every message and the loop the last, and on one
        // shared line each message would take it from the other processor.

        @usableFromInline let isOpen = Atomic<Bool>(true)
        /// Whether senders stamp their messages: an instrument listened to the loop at its last
        /// delivery (a relaxed hint; the first batch after an instrument attaches goes unstamped).
        @usableFromInline let stamps = Atomic<Bool>(false)
        private let separatesSenders = CacheLinePadding()

        // Guarded by `word`, as the loop's inbox is (`Inbox`): a send appends in a few
        // instructions, and a thread that finds the word taken spins instead of sleeping.
        @usableFromInline let word = LockWord()
        @usableFromInline @exclusivity(unchecked) var incoming = PortQueue<Message>()
        /// Empty chunks for the senders.
        @usableFromInline @exclusivity(unchecked) var spares = PortChunkStack()
        /// Whether the loop will look at the port again before it sleeps, so a sender need not
        /// signal it: set by a delivery (which makes the loop scan its ports in the next pass),
        /// cleared when the loop finds nothing sent. A busy port is signalled once, when the loop
        /// last found it empty, not once per batch: a signal takes the source's and the inbox's
        /// locks, cache lines the loop also writes.
        @exclusivity(unchecked) private var loopWillLook = false
        /// Whether `readySince` is set, for the senders to read on their own line.
        @usableFromInline @exclusivity(unchecked) var isReady = false
        private let separatesReadiness = CacheLinePadding()

        /// When the port became ready (a signal stamp; 0: no message since the last take): set
        /// under the word by the first message sent after a delivery started, cleared when one
        /// starts, read without it by the loop in every pass: on a line of its own, so that the
        /// loop's look does not take the senders' line.
        private let readySince = Atomic<UInt64>(0)
        private let separatesLoop = CacheLinePadding()

        // The loop's thread only.
        @usableFromInline @exclusivity(unchecked) var batch = PortQueue<Message>()
        /// Chunks the batch emptied, given back to `spares` with the next take.
        @usableFromInline @exclusivity(unchecked) var emptied = PortChunkStack()
        /// How many messages were ever moved to `batch`, and how many were handed to the handler.
        @usableFromInline @exclusivity(unchecked) var taken = 0
        @usableFromInline @exclusivity(unchecked) var delivered = 0

        /// The most empty chunks kept for the senders: room for as many messages as the loop
        /// keeps room for posted blocks. A burst's others go back to the allocator.
        private var sparesKept: Int { batch.chunks(holding: BlockBuffer.retainedCapacity) }

        @usableFromInline init() {}

        deinit {
            incoming.release(into: &spares)
            batch.release(into: &emptied)
            spares.free()
            emptied.free()
        }

        // The word is taken and released by hand, not through a closure: in an unspecialized
        // build of this code a closure holding the message would make the runtime look up the
        // metadata of its type on every send.

        /// Appends `message`; true if it is the first since the loop last took them (the sender
        /// signals the port, once per batch), false if the port is invalid or already signalled.
        @inlinable @inline(__always)
        func append(_ message: borrowing Message, postedAt: Int64) -> Bool {
            word.lock()
            // Checked under the word: `close` drains `incoming` after closing, so a message that
            // finds the port open here is drained or delivered, never stranded.
            guard isOpen.load(ordering: .relaxed) else {
                word.unlock()
                return false
            }
            incoming.append(message, postedAt: postedAt, spares: &spares)
            let first = !isReady && markReady()
            word.unlock()
            return first
        }

        /// Appends every element of `messages` under one lock; as `append`.
        @inlinable
        func append(contentsOf messages: UnsafeBufferPointer<Message>, postedAt: Int64) -> Bool {
            guard !messages.isEmpty else { return false }
            word.lock()
            guard isOpen.load(ordering: .relaxed) else {
                word.unlock()
                return false
            }
            for message in messages { incoming.append(message, postedAt: postedAt, spares: &spares) }
            let first = !isReady && markReady()
            word.unlock()
            return first
        }

        /// Under the word, after the first append since the loop last took the messages: whether
        /// the sender must signal the port (the loop will not look by itself).
        @usableFromInline
        func markReady() -> Bool {
            isReady = true
            readySince.store(LoopSource.nextSignalStamp(), ordering: .relaxed)
            return !loopWillLook
        }

        /// A sender's posting time for an instrument (`stamps`).
        @usableFromInline
        static func postingTime() -> Int64 { TickClock.now }

        /// Loop thread: a signal stamp while messages wait (0 while a delivery is under way), nil if
        /// none do. The word is taken only to answer nil: from then on senders signal again.
        func readiness() -> UInt64? {
            if !batch.isEmpty { return 0 }
            let since = readySince.load(ordering: .relaxed)
            if since != 0 { return since }
            word.lock()
            defer { word.unlock() }
            if incoming.isEmpty {
                loopWillLook = false
                return nil
            }
            return readySince.load(ordering: .relaxed)
        }

        /// Any thread, after the port was added to a mode, which the loop may not scan by itself:
        /// from now on senders signal, and whether messages wait (the caller signals for them).
        func wasAdded() -> Bool {
            word.lock()
            defer { word.unlock() }
            loopWillLook = false
            return !incoming.isEmpty
        }

        /// Takes every message sent so far under one lock and delivers them in order, without it. A
        /// nested run inside a callout that serves the port again continues from the next message
        /// (and may go on to newer ones), so nothing is overtaken. Ones sent meanwhile wait for the
        /// next pass.
        @inlinable
        func deliver(_ handler: (Message) -> Void) {
            let loop = takeBatch()
            let last = taken
            while delivered < last, isOpen.load(ordering: .acquiring) {
                // Moved out before the callout: a nested run delivers from the next one.
                let postedAt = batch.firstPostedAt()
                let message = batch.takeFirst(emptying: &emptied)
                delivered &+= 1
                if postedAt != 0 { dequeued(postedAt: postedAt, on: loop) }
                handler(message)
            }
            finishBatch(on: loop)
        }

        /// The start of `deliver`: moves the messages sent so far behind `batch`; the running loop.
        @usableFromInline
        func takeBatch() -> Loop {
            let loop = Loop.current
            let stamping = loop.stampsPostedWork
            if stamps.load(ordering: .relaxed) != stamping { stamps.store(stamping, ordering: .relaxed) }
            let kept = sparesKept
            word.lock()
            readySince.store(0, ordering: .relaxed)
            isReady = false
            loopWillLook = true
            emptied.move(to: &spares, upTo: kept)
            let count = incoming.count
            if batch.isEmpty {
                // The usual case: the batch was delivered; the senders start on empty chunks.
                batch.exchange(with: &incoming)
            } else {
                // In a nested run, behind the rest of the outer run's batch.
                batch.append(movingFrom: &incoming)
            }
            word.unlock()
            // A burst's chunks beyond what the senders keep.
            emptied.free()
            taken += count
            return loop
        }

        /// A stamped message is handed to the handler.
        @usableFromInline
        func dequeued(postedAt: Int64, on loop: Loop) {
            loop.instrumentDequeue(.source, postedAt: postedAt)
        }

        /// The end of `deliver`, whether the batch was delivered or the port invalidated.
        @usableFromInline
        func finishBatch(on loop: Loop) {
            // The promise made to the senders in `takeBatch`: the next pass scans the ports.
            loop.portSignalled.store(true, ordering: .releasing)
            if !batch.isEmpty && !isOpen.load(ordering: .acquiring) {
                // Invalidated during the batch: the rest is dropped here, on the loop's thread.
                delivered += batch.count
                batch.release(into: &emptied)
                emptied.free()
            }
        }

        /// Any thread: closes the mailbox and drops what was sent and not taken.
        func close() {
            isOpen.store(false, ordering: .releasing)
            // Released after the word: a message's deinit may send to the port.
            var dropped = PortQueue<Message>()
            var chunks = PortChunkStack()
            word.lock()
            dropped.exchange(with: &incoming)
            spares.move(to: &chunks, upTo: .max)
            word.unlock()
            dropped.release(into: &chunks)
            chunks.free()
        }
    }

    @usableFromInline let mailbox: Mailbox
    /// The port is a custom source whose perform drains the mailbox.
    @usableFromInline let source: LoopSource

    /// Creates a port whose `handler` receives each message on the loop's thread.
    ///
    /// Any thread. The port does nothing until added to a loop; messages sent before that wait.
    @inlinable
    public convenience init(_ handler: sending @escaping (Message) -> Void) {
        // The delivery loop is made here, in the caller's module, for its `Message`.
        self.init(mailbox: Mailbox(), delivering: { mailbox in mailbox.deliver(handler) })
    }

    /// A port whose source's perform calls `deliver` with `mailbox`.
    @usableFromInline
    init(mailbox: Mailbox, delivering deliver: sending @escaping (Mailbox) -> Void) {
        self.mailbox = mailbox
        // Ready while messages wait; 0 (first) for a port whose delivery is under way.
        let readiness: @Sendable () -> UInt64? = { mailbox.readiness() }
        source = LoopSource(order: 0, readiness: readiness) { deliver(mailbox) }
        source.keepAlive(self)
    }

    /// Queues `message` and wakes the loop.
    ///
    /// Any thread. Messages from one thread are delivered in the order they were sent. Messages
    /// sent after `invalidate()` are dropped.
    @inlinable
    public func send(_ message: Message) {
        let postedAt = mailbox.stamps.load(ordering: .relaxed) ? Mailbox.postingTime() : 0
        if mailbox.append(message, postedAt: postedAt) { source.signal() }
    }

    /// Queues `messages`, in their order, under one lock, and wakes the loop once: for a thread
    /// that has many messages at hand.
    ///
    /// Any thread. The messages arrive in order, after the ones this thread sent before and
    /// before the ones it sends after, never interleaved with other threads' messages. A
    /// sequence without contiguous storage is first copied into an array. Dropped after
    /// `invalidate()`.
    @inlinable
    public func send(contentsOf messages: some Sequence<Message>) {
        let postedAt = mailbox.stamps.load(ordering: .relaxed) ? Mailbox.postingTime() : 0
        let wasFirst =
            messages.withContiguousStorageIfAvailable { mailbox.append(contentsOf: $0, postedAt: postedAt) }
            ?? Array(messages).withUnsafeBufferPointer { mailbox.append(contentsOf: $0, postedAt: postedAt) }
        if wasFirst { source.signal() }
    }

    /// Whether the port is still in service.
    ///
    /// Any thread.
    public var isValid: Bool { mailbox.isOpen.load(ordering: .acquiring) }

    /// Stops the port for good: removes it from its loop, drops undelivered messages and releases
    /// its handler.
    ///
    /// Any thread, including from inside the handler (the rest of that batch is not delivered).
    public func invalidate() {
        mailbox.close()
        source.invalidate()
    }
}

extension Loop {
    /// Adds a port to `mode` (`.common`: every common mode, now and later).
    ///
    /// Any thread. A port belongs to one loop: adding it to a second loop is a programmer error.
    public func add<Message>(_ port: LoopPort<Message>, forMode mode: Mode) {
        add(port.source, forMode: mode)
        if port.mailbox.wasAdded() { port.source.signal() }
    }

    /// Removes a port from `mode` without invalidating it; its messages wait.
    ///
    /// Any thread.
    public func remove<Message>(_ port: LoopPort<Message>, forMode mode: Mode) {
        remove(port.source, forMode: mode)
    }

    /// Whether a port is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains<Message>(_ port: LoopPort<Message>, inMode mode: Mode) -> Bool {
        contains(port.source, inMode: mode)
    }
}
