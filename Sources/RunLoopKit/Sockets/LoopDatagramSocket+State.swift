// The datagram socket's send side: a value under the socket's lock, changed in one place, by the
// event functions below, which say what to do next. Any thread, under `shared`'s lock; the
// effects are carried out after it.
//
// The send side:
//
// | from | event | to | effect |
// |---|---|---|---|
// | `idle` | `datagramsWaiting` (in a loop) | `flushPosted` | post a flush |
// | any | `datagramsWaiting` (otherwise) | the same | (the flush due takes them; in no loop, joining one posts it) |
// | `idle`, `flushPosted`, `flushing` | `flushBegan` (datagrams queued, socket open) | `flushing` | take the queue and send it |
// | `idle`, `flushPosted`, `flushing` | `flushBegan` (nothing to send) | `idle` | |
// | `waitingForWritable` | `flushBegan` | `waitingForWritable` | (the writable socket flushes) |
// | `flushing` | `batchSent` (not blocked) | `flushing` | flush again |
// | `flushing` | `batchSent` (blocked, socket open) | `waitingForWritable` | the rest goes back first in the queue; watch writable |
// | `flushing` | `batchSent` (blocked, invalidated) | `idle` | the rest fails |
// | `waitingForWritable` | `becameWritable` | `idle` | flush |
// | any other | `becameWritable` | the same | flush |
//
// A datagram goes to the kernel at once only from `idle` (with nothing queued, on the loop's
// thread); the socket watches for writable only in `waitingForWritable`.
//
// Whether the socket is open is its `ResidentLifecycle` (`ResidentLifecycle.swift`), shared with
// the listener: only an open socket queues datagrams, takes waiting calls, reads and reports
// errors.

extension LoopDatagramSocket {
    /// Where the send queue is (see the table above).
    enum SendState: CheckedStep, CaseIterable, Sendable {
        /// No flush is due: a datagram sent on the loop's thread with nothing queued goes straight
        /// to the kernel.
        case idle
        /// A flush is posted to the loop and has not started yet.
        case flushPosted
        /// The loop's thread is sending a batch taken from the queue.
        case flushing
        /// The kernel's buffer was full: the queue waits for the socket to be writable.
        case waitingForWritable

        /// What to do after a step, once the lock is let go.
        enum Effect: Equatable, Sendable {
            case none
            /// Post a flush to the socket's loop.
            case postFlush
            /// Take the queue and send it (loop thread).
            case sendBatch
            /// Run the flush (again): `flushBegan` decides what it sends.
            case flush
            /// Put what the kernel did not take back before what was queued meanwhile, and watch
            /// for writable.
            case waitForWritable
            /// Fail what the kernel did not take: the socket was invalidated meanwhile.
            case discardBatch
        }

        /// Whether a datagram may go to the kernel at once (with nothing queued).
        var sendsDirectly: Bool { self == .idle }
        /// Whether the socket watches for writable.
        var wantsWritable: Bool { self == .waitingForWritable }

        /// Datagrams were queued (a send, or the socket joining a loop with some queued).
        mutating func datagramsWaiting(inLoop: Bool) -> Effect {
            guard self == .idle, inLoop else { return .none }
            become(.flushPosted)
            return .postFlush
        }

        /// Loop thread: a flush starts (posted, run again, or the socket became writable);
        /// `hasWork`: datagrams are queued and the socket is open.
        mutating func flushBegan(hasWork: Bool) -> Effect {
            guard self != .waitingForWritable else { return .none }
            become(hasWork ? .flushing : .idle)
            return hasWork ? .sendBatch : .none
        }

        /// Loop thread: a batch went to the kernel; `blocked`: its buffer filled up before the
        /// end; `open`: the socket is still open.
        mutating func batchSent(blocked: Bool, open: Bool) -> Effect {
            guard blocked else {
                become(.flushing)
                return .flush
            }
            become(open ? .waitingForWritable : .idle)
            return open ? .waitForWritable : .discardBatch
        }

        /// Loop thread: the socket is writable.
        mutating func becameWritable() -> Effect {
            if self == .waitingForWritable { become(.idle) }
            return .flush
        }

        /// Whether the send side may go from `from` to `next` (the table above), checked in debug
        /// builds.
        static func mayChange(_ from: SendState, to next: SendState) -> Bool {
            switch (from, next) {
            case (.idle, .idle), (.idle, .flushPosted), (.idle, .flushing): true
            case (.flushPosted, .flushPosted), (.flushPosted, .flushing), (.flushPosted, .idle): true
            case (.flushing, .flushing), (.flushing, .idle), (.flushing, .waitingForWritable): true
            case (.waitingForWritable, .waitingForWritable), (.waitingForWritable, .idle): true
            default: false
            }
        }

        static let checkedName = "a datagram socket's send side"
    }
}
