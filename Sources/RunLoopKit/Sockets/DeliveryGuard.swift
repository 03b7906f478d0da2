// Whether a connection or a datagram socket is handing what it read to a handler, and whether
// the socket was found readable meanwhile. A handler runs on the loop's thread and may run the
// loop (a nested run), in which the same socket may be readable again, or another delivery be
// asked for: neither may go ahead while the input (a connection's buffer, a datagram socket's
// receive slots) is lent out. The readable event is remembered instead, and served once the
// delivery returns. One value, changed by the event functions below, which say what to do. Loop
// thread only.
//
// | from | event | to | answer |
// |---|---|---|---|
// | `idle` | `begin` | `delivering` | true: deliver |
// | `delivering`, `deliveringWithReadablePending` | `begin` | the same | false: a delivery does not nest |
// | `idle` | `readable` | `idle` | true: read now |
// | `delivering`, `deliveringWithReadablePending` | `readable` | `deliveringWithReadablePending` | false: remembered, not read now |
// | `delivering` | `end` | `idle` | false |
// | `deliveringWithReadablePending` | `end` | `idle` | true: the socket was readable meanwhile |
//
// An `end` outside a delivery is a programmer error (checked in debug builds).

/// A delivery to a handler, and a readable event that came during it (see the table above).
enum DeliveryGuard: CheckedStep, CaseIterable, Sendable {
    case idle
    /// A handler is being given what was read.
    case delivering
    /// A handler is being given what was read, and a nested run found the socket readable: the
    /// socket is not read until the delivery returns.
    case deliveringWithReadablePending

    /// Whether a delivery is under way: the input is lent out.
    var isDelivering: Bool { self != .idle }
    /// Whether a nested run found the socket readable during the delivery under way.
    var readableIsPending: Bool { self == .deliveringWithReadablePending }

    /// A delivery is to start: returns whether it may (not inside another).
    mutating func begin() -> Bool {
        guard self == .idle else { return false }
        become(.delivering)
        return true
    }

    /// The socket is readable: returns whether to read it now. During a delivery the event is
    /// remembered instead.
    mutating func readable() -> Bool {
        guard self != .idle else { return true }
        become(.deliveringWithReadablePending)
        return false
    }

    /// The delivery returned: returns whether the socket was found readable meanwhile.
    mutating func end() -> Bool {
        assert(self != .idle, "RunLoopKit: a delivery may not end before it began")
        let pending = readableIsPending
        become(.idle)
        return pending
    }

    /// Whether the guard may go from `from` to `next` (the table above), checked in debug builds.
    static func mayChange(_ from: DeliveryGuard, to next: DeliveryGuard) -> Bool {
        switch (from, next) {
        case (.idle, .idle), (.idle, .delivering): true
        case (.delivering, .delivering), (.delivering, .deliveringWithReadablePending), (.delivering, .idle): true
        case (.deliveringWithReadablePending, .deliveringWithReadablePending),
            (.deliveringWithReadablePending, .idle):
            true
        default: false
        }
    }

    static let checkedName = "a socket's delivery guard"
}
