// The connection's handlers (`onRead`, `onEvent`), the boxes that carry them to its loop, and its events' names.

extension LoopConnection {
    /// Sets the handler that gets the input buffer whenever bytes arrived; it consumes what it
    /// uses (`read`, `readLine`, `consume`) and leaves the rest for next time. Bytes already
    /// waiting are delivered soon after, on the loop's thread.
    ///
    /// Any thread; the handler runs on the loop's thread.
    public func onRead(_ handler: sending @escaping (LoopConnection, inout LoopBuffer) -> Void) {
        let box = ReadHandler(handler)
        onLoop { connection in
            connection.core.readHandler = box.handler
            connection.scheduleDelivery()
        }
    }

    /// Sets the handler for `writable`, `readClosed` and `closed`.
    ///
    /// Any thread; the handler runs on the loop's thread. Set after the peer's end of stream, it
    /// is told `readClosed` soon after; set after the connection closed, it is told `readClosed`
    /// (if the peer's end of stream came first) and then `closed`, once. With `onRead` set before
    /// it, a connection that already had its input, its end of stream and its close delivers them
    /// in that order.
    public func onEvent(_ handler: sending @escaping (LoopConnection, Event) -> Void) {
        let box = EventHandler(handler)
        onLoop { connection in
            guard connection.isClosed else {
                connection.core.eventHandler = box.handler
                // Told on a later pass, as `onRead` is of waiting input, unless the close (or
                // another handler) comes first: `enterClosed` tells it before `closed`.
                if connection.core.endOfStream == .unheard {
                    connection.hop(to: connection.loop) { connection.tellUnheardReadClosed() }
                }
                return
            }
            guard connection.core.lifecycle.tellClose() else { return }
            let error = connection.core.closedError
            let endFirst = connection.core.endOfStream.tell()
            connection.hop(to: connection.loop) {
                if endFirst { box.handler(connection, .readClosed) }
                box.handler(connection, .closed(error))
            }
        }
    }
}

extension LoopConnection.Event: CustomStringConvertible {
    /// `writable`, `readClosed`, `closed` (an orderly close), or `closed: ` and the error's
    /// message.
    public var description: String {
        switch self {
        case .writable: return "writable"
        case .readClosed: return "readClosed"
        case .closed(nil): return "closed"
        case .closed(let error?): return "closed: \(error)"
        }
    }
}

// The handlers cross to the loop's thread in boxes of their own type, not in `Unchecked`: a
// closure stored in a generic box is kept at the most general abstraction, so taking it out again
// wraps it in a conversion thunk (an allocation per connection) and every call through it passes
// two thunks.

/// Carries an `onRead` handler to the loop's thread.
struct ReadHandler: @unchecked Sendable {
    let handler: (LoopConnection, inout LoopBuffer) -> Void
    init(_ handler: sending @escaping (LoopConnection, inout LoopBuffer) -> Void) { self.handler = handler }
}

/// Carries an `onEvent` handler to the loop's thread.
struct EventHandler: @unchecked Sendable {
    let handler: (LoopConnection, LoopConnection.Event) -> Void
    init(_ handler: sending @escaping (LoopConnection, LoopConnection.Event) -> Void) { self.handler = handler }
}
