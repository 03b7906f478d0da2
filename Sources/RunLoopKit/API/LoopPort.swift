import Synchronization

/// A typed message port (CFRunLoop's version 1 source): any thread sends, and the loop delivers the
/// messages in order on its own thread, in the modes that hold the port.
///
/// Delivering messages counts as a handled source. A port keeps its modes alive even with no
/// traffic, so the keep-alive pattern `loop.add(port, forMode: .default)` works (on Foundation on
/// Linux, `add(Port())` traps). A port belongs to one loop, which keeps it (and its handler) alive
/// while it is in one of the loop's modes, whether or not the caller keeps a reference.
public final class LoopPort<Message: Sendable>: @unchecked Sendable {
    /// Messages sent and not yet delivered.
    private final class Mailbox: Sendable {
        struct Queue {
            /// Each message with its posting time (ticks) while an instrument listens, else 0.
            /// Taken ones are moved out (nil): a message's deinit may send to the port, so none is
            /// released under the lock.
            var messages: [(Message, Ticks)?] = []
            /// Index of the first undelivered message (delivered ones are dropped in bulk).
            var head = 0
            /// How many messages were ever queued: the last one's number.
            var sent = 0
            /// How many were ever taken for delivery.
            var delivered: Int { sent - (messages.count - head) }
            /// When the port became ready (a signal stamp): set by the first message sent after
            /// a delivery started, cleared when one starts.
            var readySince: UInt64?

            var isEmpty: Bool { head == messages.count }

            mutating func takeFirst() -> (Message, Ticks)? {
                messages.moveFirst(head: &head)
            }
        }

        let queue = Locked(Queue())
        let isOpen = Atomic<Bool>(true)

        /// Delivers the messages queued when the port's turn came, in order, one at a time: a nested
        /// run inside a callout that serves the port again continues from the next message (and
        /// may go on to newer ones), so nothing is overtaken. Ones sent meanwhile wait for the
        /// next pass.
        func deliver(_ handler: (Message) -> Void) {
            let last = queue.withLock { queue in
                queue.readySince = nil
                return queue.sent
            }
            let loop = Loop.current
            while isOpen.load(ordering: .acquiring) {
                let next: (Message, Ticks)? = queue.withLock { queue in
                    queue.delivered < last ? queue.takeFirst() : nil
                }
                guard let (message, postedAt) = next else { return }
                loop.instrumentDequeue(.source, postedAt: postedAt)
                handler(message)
            }
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
        let readiness: @Sendable () -> UInt64? = {
            mailbox.queue.withLock { $0.isEmpty ? nil : ($0.readySince ?? 0) }
        }
        source = LoopSource(order: 0, readiness: readiness) { mailbox.deliver(handler) }
        source.keepAlive(self)
    }

    /// Queues `message` and wakes the loop.
    ///
    /// Any thread. Messages from one thread are delivered in the order they were sent. Messages
    /// sent after `invalidate()` are dropped.
    public func send(_ message: Message) {
        guard mailbox.isOpen.load(ordering: .acquiring) else { return }
        let postedAt = source.owner?.stampsPostedWork == true ? TickClock.now : 0
        mailbox.queue.withLock { queue in
            queue.messages.append((message, postedAt))
            queue.sent += 1
            if queue.readySince == nil { queue.readySince = LoopSource.nextSignalStamp() }
        }
        source.signal()
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
        mailbox.isOpen.store(false, ordering: .releasing)
        source.invalidate()
        // Dropped after the lock: a message's deinit may send to the port.
        let dropped = mailbox.queue.withLock { queue in
            defer { queue.head = 0 }
            let messages = queue.messages
            queue.messages = []
            return messages
        }
        withExtendedLifetime(dropped) {}
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
