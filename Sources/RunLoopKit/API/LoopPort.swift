import Synchronization

/// A typed message port (CFRunLoop's version 1 source): any thread sends, and the loop delivers the
/// messages in order on its own thread, in the modes that hold the port.
///
/// Delivering messages counts as a handled source. A port keeps its modes alive even with no
/// traffic, so the keep-alive pattern `loop.add(port, forMode: .default)` works (on Foundation on
/// Linux, `add(Port())` traps). A port belongs to one loop, which keeps it (and its handler) alive
/// while it is in one of the loop's modes, whether or not the caller keeps a reference.
///
/// Messages are stored by value in buffers the port keeps: once they have grown to the largest
/// batch, a port whose `Message` holds no references allocates nothing per message.
public final class LoopPort<Message: Sendable>: @unchecked Sendable {
    /// Messages sent and not yet delivered: the ones sent since the loop last took them, and the
    /// batch the loop is delivering.
    ///
    /// Senders append to `incoming` under `word`; the loop takes them all at once by trading
    /// storage with `batch`, its own, which it delivers from without the lock. The two buffers
    /// take turns and keep their capacity, so a steady stream allocates nothing.
    private final class Mailbox: @unchecked Sendable {
        /// A message with its posting time (ticks) while an instrument listens, else 0.
        typealias Entry = (message: Message, postedAt: Ticks)

        // Guarded by `word`, as the loop's inbox is (`Inbox`): a send appends in a few
        // instructions, and a thread that finds the word taken spins instead of sleeping.
        private let word = LockWord()
        @exclusivity(unchecked) private var incoming = PortBuffer<Entry>()
        /// When the port became ready (a signal stamp): set by the first message sent after a
        /// delivery started, cleared when one starts.
        @exclusivity(unchecked) private var readySince: UInt64?

        // The loop's thread only.
        @exclusivity(unchecked) private var batch = PortBuffer<Entry>()
        /// Index in `batch` of the next message to deliver.
        @exclusivity(unchecked) private var head = 0
        /// How many messages were ever moved to `batch`, and how many were handed to the handler.
        @exclusivity(unchecked) private var taken = 0
        @exclusivity(unchecked) private var delivered = 0

        let isOpen = Atomic<Bool>(true)
        /// Whether senders stamp their messages: an instrument listened to the loop at its last
        /// delivery (a relaxed hint; the first batch after an instrument attaches goes unstamped).
        let stamps = Atomic<Bool>(false)

        deinit {
            incoming.release(from: 0)
            batch.release(from: head)
        }

        /// Appends `message`; true if it is the first since the loop last took them (the sender
        /// signals the port, once per batch), false if the port is invalid or already signalled.
        @inline(__always)
        func append(_ message: consuming Message, postedAt: Ticks) -> Bool {
            var entry: Entry? = (consume message, postedAt)
            return word.withLock {
                // Checked under the word: `invalidate` drains `incoming` after closing, so a message
                // that finds the port open here is drained or delivered, never stranded.
                guard isOpen.load(ordering: .relaxed) else { return false }
                incoming.append(entry.take()!)
                return markReady()
            }
        }

        /// Appends every element of `messages` (contiguous) under one lock; as `append`.
        func append(contentsOf messages: UnsafeBufferPointer<Message>, postedAt: Ticks) -> Bool {
            word.withLock {
                guard isOpen.load(ordering: .relaxed), !messages.isEmpty else { return false }
                incoming.reserve(incoming.count + messages.count)
                for message in messages { incoming.append((message, postedAt)) }
                return markReady()
            }
        }

        /// Under the word, after an append: whether this append is the first of a batch.
        @inline(__always)
        private func markReady() -> Bool {
            guard readySince == nil else { return false }
            readySince = LoopSource.nextSignalStamp()
            return true
        }

        /// Loop thread: a signal stamp while messages wait (0 while a delivery is under way), nil if
        /// none do.
        func readiness() -> UInt64? {
            if head < batch.count { return 0 }
            return word.withLock { incoming.count > 0 ? readySince ?? 0 : nil }
        }

        /// Loop thread: drops what `invalidate` could not reach, the rest of the batch.
        func dropBatch() {
            delivered += batch.count - head
            batch.release(from: head)
            head = 0
        }

        /// Takes every message sent so far under one lock and delivers them in order, without it. A
        /// nested run inside a callout that serves the port again continues from the next message
        /// (and may go on to newer ones), so nothing is overtaken. Ones sent meanwhile wait for the
        /// next pass.
        func deliver(_ handler: (Message) -> Void) {
            let loop = Loop.current
            let stamping = loop.stampsPostedWork
            if stamps.load(ordering: .relaxed) != stamping { stamps.store(stamping, ordering: .relaxed) }
            word.withLock {
                readySince = nil
                let count = incoming.count
                guard count > 0 else { return }
                if head == batch.count {
                    // The usual case: the batch was delivered; its storage goes back to the senders.
                    head = 0
                    batch.removeAll()
                    batch.exchange(with: &incoming)
                } else {
                    // In a nested run, behind the rest of the outer run's batch.
                    batch.append(movingFrom: &incoming)
                }
                taken += count
            }
            let last = taken
            while delivered < last, isOpen.load(ordering: .acquiring) {
                // Moved out before the callout: a nested run delivers from the next one.
                let (message, postedAt) = batch.take(at: head)
                head += 1
                delivered += 1
                if postedAt != 0 { loop.instrumentDequeue(.source, postedAt: postedAt) }
                handler(message)
            }
            if head == batch.count {
                head = 0
                batch.removeAll()
                // A burst grew it beyond what a port keeps: its memory goes back.
                if batch.capacity > PortBuffer<Entry>.retainedCapacity { batch.release(from: 0) }
            } else if !isOpen.load(ordering: .acquiring) {
                dropBatch()
            }
        }

        /// Any thread: closes the mailbox and drops what was sent and not taken.
        func close() {
            isOpen.store(false, ordering: .releasing)
            // Released after the word: a message's deinit may send to the port.
            var dropped = word.withLock {
                var dropped = PortBuffer<Entry>()
                dropped.exchange(with: &incoming)
                return dropped
            }
            dropped.release(from: 0)
        }
    }

    private let mailbox = Mailbox()
    /// The port is a custom source whose perform drains the mailbox.
    let source: LoopSource

    /// Creates a port whose `handler` receives each message on the loop's thread.
    ///
    /// Any thread. The port does nothing until added to a loop; messages sent before that wait.
    public init(_ handler: sending @escaping (Message) -> Void) {
        let mailbox = self.mailbox
        // Ready while messages wait; 0 (first) for a port whose delivery is under way.
        let readiness: @Sendable () -> UInt64? = { mailbox.readiness() }
        source = LoopSource(order: 0, readiness: readiness) { mailbox.deliver(handler) }
        source.keepAlive(self)
    }

    /// Queues `message` and wakes the loop.
    ///
    /// Any thread. Messages from one thread are delivered in the order they were sent. Messages
    /// sent after `invalidate()` are dropped.
    public func send(_ message: Message) {
        let postedAt = mailbox.stamps.load(ordering: .relaxed) ? TickClock.now : 0
        if mailbox.append(message, postedAt: postedAt) { source.signal() }
    }

    /// Queues `messages`, in their order, under one lock, and wakes the loop once: for a thread
    /// that has many messages at hand.
    ///
    /// Any thread. The messages arrive in order, after the ones this thread sent before and
    /// before the ones it sends after, never interleaved with other threads' messages. A
    /// sequence without contiguous storage is first copied into an array. Dropped after
    /// `invalidate()`.
    public func send(contentsOf messages: some Sequence<Message>) {
        let postedAt = mailbox.stamps.load(ordering: .relaxed) ? TickClock.now : 0
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
