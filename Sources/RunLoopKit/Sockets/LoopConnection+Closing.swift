// Closing a connection from any thread: the idle timeout, half closure, shutdown, close and abort.

import Synchronization

extension LoopConnection {
    /// How long the connection may pass with no bytes read or written before it closes with a
    /// `LoopError` (`systemError` `ETIMEDOUT`); nil (the default) for no limit.
    ///
    /// Any thread. A zero or negative duration is a programmer error.
    public var idleTimeout: Duration? {
        get { withSettings { $0.idleTimeout } }
        set {
            if let newValue {
                precondition(newValue > .zero, "RunLoopKit: idleTimeout must be positive or nil, not \(newValue)")
            }
            withSettings { $0.idleTimeout = newValue }
            onLoop { $0.armDeadline() }
        }
    }

    /// Whether the connection stays open for writing after the peer's end of stream (until
    /// `shutdownOutput()` or `close()`); false (the default): it flushes its output and closes.
    ///
    /// Any thread.
    public var allowsHalfClosure: Bool {
        get { switches.contains(.allowsHalfClosure) }
        set { set(.allowsHalfClosure, newValue) }
    }

    /// Flushes the queued output, then ends this side's stream (FIN); reading goes on until the
    /// peer ends its side, and then the connection closes.
    ///
    /// Any thread.
    public func shutdownOutput() {
        onLoop { $0.apply(.shutdownRequested) }
    }

    /// Closes gracefully: nothing more is read or written, the queued output is flushed, then
    /// this side's stream ends (FIN) and the connection waits for the peer's end of stream before
    /// it closes the socket and reports `closed(nil)`.
    ///
    /// Any thread. While it waits, whatever the peer still sends is read and dropped, for 2
    /// seconds and 1 MiB at most (then it closes anyway). Closing a socket with unread input
    /// would send a reset (RST) instead, and a reset can destroy response bytes the peer has not
    /// read yet; this way the peer receives every byte written before `close()`, then its end of
    /// stream. Input already read and not consumed stays readable with `read(maxLength:)`; `onRead`
    /// is not called for what arrives later. Use `abort()` for an immediate reset.
    public func close() {
        onLoop { $0.apply(.closeRequested) }
    }

    /// Closes now with a reset (RST), dropping queued output (also during the wait of a graceful
    /// `close()`); reports `closed(nil)`.
    ///
    /// Any thread.
    public func abort() {
        onLoop { $0.apply(.aborted) }
    }
}
