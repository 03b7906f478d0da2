import Synchronization

/// A typed message port (CFRunLoop's version 1 source): any thread sends, and the loop delivers the
/// messages in order on its own thread, in the modes that hold the port.
///
/// Delivering messages counts as a handled source. A port keeps its modes alive even with no
/// traffic, so the keep-alive pattern `loop.add(port, forMode: .default)` works (on Foundation on
/// Linux, `add(Port())` traps). A port belongs to one loop.
public final class LoopPort<Message: Sendable>: @unchecked Sendable {
    /// Messages sent and not yet delivered.
    private final class Mailbox: Sendable {
        /// Each message with its posting time (ticks) while an instrument listens, else 0.
        let messages = Locked<[(Message, Ticks)]>([])
        let isOpen = Atomic<Bool>(true)

        /// Delivers the messages queued so far, in order; ones sent meanwhile signal the next pass.
        func deliver(_ handler: (Message) -> Void) {
            let batch: [(Message, Ticks)] = messages.withLock { messages in
                defer { messages.removeAll(keepingCapacity: true) }
                return messages
            }
            let loop = Loop.current
            for (message, postedAt) in batch {
                guard isOpen.load(ordering: .acquiring) else { return }
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
    public init(_ handler: @escaping (Message) -> Void) {
        let mailbox = self.mailbox
        source = LoopSource { mailbox.deliver(handler) }
    }

    /// Queues `message` and wakes the loop.
    ///
    /// Any thread. Messages from one thread are delivered in the order they were sent. Messages
    /// sent after `invalidate()` are dropped.
    public func send(_ message: Message) {
        guard mailbox.isOpen.load(ordering: .acquiring) else { return }
        let postedAt = source.owner?.stampsPostedWork == true ? TickClock.now : 0
        mailbox.messages.withLock { $0.append((message, postedAt)) }
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
        mailbox.messages.withLock { $0.removeAll() }
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
