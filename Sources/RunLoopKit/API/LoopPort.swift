import Synchronization

/// A typed message port (CFRunLoop's version 1 source): any thread sends, and the loop delivers the
/// messages in order on its own thread, in the modes that hold the port.
///
/// Delivering messages counts as a handled source. A port keeps its modes alive even with no
/// traffic, so the keep-alive pattern `loop.add(port, forMode: .default)` works (on Foundation on
/// Linux, `add(Port())` traps). A port belongs to one loop, which keeps it (and its handler) alive
/// while it is in one of the loop's modes, whether or not the caller keeps a reference.
///
/// Messages are stored by value in chunks the port reuses, and a send takes no lock (one atomic
/// add claims its place), so senders never wait for each other. Once a steady stream has as many
/// chunks as it needs, a port whose `Message` holds no references allocates nothing per message.
public final class LoopPort<Message: Sendable>: @unchecked Sendable {
    /// Messages sent and not yet delivered, in a queue senders add to without a lock
    /// (`PortChannel`, which this adds the message type to).
    ///
    /// A message's path (`append`, the loop of `deliver`) is inlinable, so that it is compiled in
    /// the caller's module for its `Message`: a struct is copied with plain moves, where generic
    /// code calls the type's value witnesses for every copy, move and destruction. What happens
    /// once per batch or chunk (taking the messages, signalling, instruments) is not.
    @usableFromInline
    final class Mailbox: PortChannel, @unchecked Sendable {
        @usableFromInline init() {
            super.init(layout: PortLayout(size: MemoryLayout<Message>.size, alignment: MemoryLayout<Message>.alignment))
        }

        deinit {
            // Every message written and neither delivered nor dropped; the chunks go in `super`.
            var chunk: UnsafeMutableRawPointer? = cursor
            while let current = chunk {
                for offset in 0..<layout.capacity { dropIfWritten(layout.slot(offset, in: current)) }
                chunk = PortChunk.next(of: current)
            }
        }

        /// Writes `message` at a claimed `position` (or marks it skipped if the port is closed).
        @inlinable @inline(__always)
        func write(_ message: borrowing Message, at position: Int, in chunk: UnsafeMutableRawPointer, postedAt: Int64) {
            let offset = position &- PortChunk.start(of: chunk)
            let slot = layout.slot(offset, in: chunk)
            let flag = layout.flag(ofSlot: slot)
            // Read after the claim: `close` reads the tail after closing, so a position it does not
            // drop is one whose sender sees the port closed here.
            guard isOpen.load(ordering: .sequentiallyConsistent) else {
                flag.pointee.store(PortChunk.skipped, ordering: .releasing)
                return
            }
            slot.assumingMemoryBound(to: Message.self).initialize(to: copy message)
            if postedAt != 0 {
                layout.stamp(offset, in: chunk).pointee = postedAt
                flag.pointee.store(PortChunk.stamped, ordering: .releasing)
            } else {
                flag.pointee.store(PortChunk.written, ordering: .releasing)
            }
        }

        /// Appends `message`; true if the sender must signal the port (the loop will not look by
        /// itself). False if the port is closed.
        @inlinable @inline(__always)
        func append(_ message: borrowing Message, postedAt: Int64) -> Bool {
            guard isOpen.load(ordering: .relaxed) else { return false }
            let position = tail.wrappingAdd(1, ordering: .sequentiallyConsistent).oldValue
            write(message, at: position, in: chunk(holding: position), postedAt: postedAt)
            return mustSignal()
        }

        /// Appends every element of `messages` at consecutive positions claimed at once; as `append`.
        @inlinable
        func append(contentsOf messages: UnsafeBufferPointer<Message>, postedAt: Int64) -> Bool {
            guard !messages.isEmpty, isOpen.load(ordering: .relaxed) else { return false }
            var position = tail.wrappingAdd(messages.count, ordering: .sequentiallyConsistent).oldValue
            var chunk = chunk(holding: position)
            for message in messages {
                if position &- PortChunk.start(of: chunk) == layout.capacity { chunk = locate(position, from: chunk) }
                write(message, at: position, in: chunk, postedAt: postedAt)
                position &+= 1
            }
            return mustSignal()
        }

        /// Delivers, in order, every message sent so far. A nested run inside a callout that
        /// serves the port again continues from the next message (and may go on to newer ones), so
        /// nothing is overtaken. Ones sent meanwhile wait for the next pass.
        @inlinable
        func deliver(_ handler: (Message) -> Void) {
            let loop = takeBatch()
            let last = taken
            while delivered < last, isOpen.load(ordering: .acquiring) {
                var chunk = cursor
                var start = PortChunk.start(of: chunk)
                if delivered &- start == layout.capacity {
                    chunk = advanceCursor()
                    start = PortChunk.start(of: chunk)
                }
                // This chunk's part of the batch, walked with a pointer: a handler that runs the
                // loop again (which may deliver on from here) or invalidates the port ends the walk.
                var position = delivered
                let end = min(last, start &+ layout.capacity)
                var slot = layout.slot(position &- start, in: chunk)
                repeat {
                    let flag = layout.flag(ofSlot: slot)
                    var state = flag.pointee.load(ordering: .acquiring)
                    if state == PortChunk.empty { state = PortChannel.waitForWrite(flag) }
                    // Moved on before the callout: a nested run delivers from the next one.
                    position &+= 1
                    delivered = position
                    if state == PortChunk.skipped {
                        // Its sender found the port closed: so will the loop, above.
                        flag.pointee.store(PortChunk.empty, ordering: .relaxed)
                        break
                    }
                    let offset = position &- 1 &- start
                    let postedAt = state == PortChunk.stamped ? layout.stamp(offset, in: chunk).pointee : 0
                    let message = slot.assumingMemoryBound(to: Message.self).move()
                    flag.pointee.store(PortChunk.empty, ordering: .relaxed)
                    if postedAt != 0 { dequeued(postedAt: postedAt, on: loop) }
                    handler(message)
                    if delivered != position || !isOpen.load(ordering: .acquiring) { break }
                    slot += layout.slotStride
                } while position < end
            }
            if delivered < taken && !isOpen.load(ordering: .acquiring) { dropRestOfBatch() }
            finishBatch(on: loop)
        }

        /// A stamped message is handed to the handler.
        @usableFromInline
        func dequeued(postedAt: Int64, on loop: Loop) {
            loop.instrumentDequeue(.source, postedAt: postedAt)
        }

        /// Loop thread: the port was invalidated during a batch; the rest is dropped here.
        @usableFromInline
        func dropRestOfBatch() {
            var chunk = cursor
            drop(from: delivered, to: taken, startingIn: &chunk)
            delivered = taken
        }

        /// Destroys the messages at positions `from..<to`, which start in `chunk`, once their
        /// senders wrote them, and clears their flags.
        func drop(from: Int, to: Int, startingIn chunk: inout UnsafeMutableRawPointer) {
            for position in from..<to {
                var offset = position &- PortChunk.start(of: chunk)
                if offset == layout.capacity {
                    chunk = PortChunk.waitForNext(of: chunk)
                    offset = 0
                }
                let slot = layout.slot(offset, in: chunk)
                let flag = layout.flag(ofSlot: slot)
                if flag.pointee.load(ordering: .acquiring) == PortChunk.empty { _ = PortChannel.waitForWrite(flag) }
                dropIfWritten(slot)
            }
        }

        /// Destroys the message in `slot` if there is one, and clears its flag.
        func dropIfWritten(_ slot: UnsafeMutableRawPointer) {
            let flag = layout.flag(ofSlot: slot)
            let state = flag.pointee.load(ordering: .acquiring)
            if state == PortChunk.written || state == PortChunk.stamped {
                slot.assumingMemoryBound(to: Message.self).deinitialize(count: 1)
            }
            flag.pointee.store(PortChunk.empty, ordering: .relaxed)
        }

        /// Any thread: closes the mailbox and drops what the loop had not taken, here (the loop
        /// drops the rest of a batch it is delivering). Without a lock held: a message's deinit
        /// may send to the port.
        func closeAndDrop() {
            guard let undelivered = close() else { return }
            var chunk = undelivered.chunk
            drop(from: undelivered.from, to: undelivered.to, startingIn: &chunk)
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
        let postedAt = mailbox.stamps.load(ordering: .relaxed) ? PortChannel.postingTime() : 0
        if mailbox.append(message, postedAt: postedAt) { source.signal() }
    }

    /// Queues `messages`, in their order, at consecutive places claimed at once, and wakes the loop once: for a thread
    /// that has many messages at hand.
    ///
    /// Any thread. The messages arrive in order, after the ones this thread sent before and
    /// before the ones it sends after, never interleaved with other threads' messages. A
    /// sequence without contiguous storage is first copied into an array. Dropped after
    /// `invalidate()`.
    @inlinable
    public func send(contentsOf messages: some Sequence<Message>) {
        let postedAt = mailbox.stamps.load(ordering: .relaxed) ? PortChannel.postingTime() : 0
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
        mailbox.closeAndDrop()
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
