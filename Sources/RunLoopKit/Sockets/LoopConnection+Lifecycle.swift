import Glibc

// The connection's lifecycle, changed in one place (`apply(_:)`), which takes every close,
// half-close, timeout and reset decision (the states and their table:
// `ConnectionLifecycle.swift`). Loop thread only.

extension LoopConnection {
    // MARK: Reading the lifecycle

    var isConnecting: Bool { if case .connecting = core.lifecycle { true } else { false } }
    var isClosed: Bool { if case .closed = core.lifecycle { true } else { false } }
    /// `close()` or `abort()` was called: reads throw once the input is used up (the peer's end
    /// of stream alone gives `[]`).
    var closedLocally: Bool { core.lifecycle.cause == .local }
    /// `close()` was called and the connection has not closed yet.
    var isClosing: Bool {
        switch core.lifecycle {
        case .closing, .lingering: true
        default: false
        }
    }
    /// Whether the peer's end of stream was read (or, closing, no more input is taken).
    var inputEnded: Bool {
        switch core.lifecycle {
        case .open(.ended, _), .closing(.ended, _), .closed: true
        default: false
        }
    }
    /// Whether writes are taken: connecting or open, and neither closing nor shut down.
    var acceptsOutput: Bool {
        switch core.lifecycle {
        case .connecting(then: .none), .open(_, .open): true
        default: false
        }
    }

    // MARK: Changing it

    /// Applies `change`: the one place that decides what the connection does next.
    func apply(_ change: Change) {
        assertOnLoopThread()
        switch change {
        case .shutdownRequested, .closeRequested: outputWillEnd()
        case .peerEnded where !switches.contains(.allowsHalfClosure): outputWillEnd()
        default: break
        }
        switch (core.lifecycle, change) {
        case (.closed, _):
            return
        case (_, .failed(let error)):
            enterClosed(error)
        case (_, .aborted):
            Platform.resetOnClose(fileDescriptor)
            enterClosed(nil, cause: .local)
        case (_, .sourceInvalidated):
            // Closing, with everything sent and the end of stream too: an orderly close all the same.
            let delivered = core.lifecycle == .lingering && descriptorSource.error == nil
            enterClosed(
                delivered
                    ? nil
                    : descriptorSource.error ?? LoopError("the loop of the connection to \(remoteAddress) has ended"))

        case (.connecting(let request), .connected):
            switch request {
            case .none: become(.open(input: .open, output: .open))
            case .shutdown: become(.open(input: .open, output: .shutAfterFlush))
            case .close: become(.closing(input: .open, cause: .local))
            }
        case (.connecting(let request), .shutdownRequested):
            if request == .none { become(.connecting(then: .shutdown)) }
        case (.connecting, .closeRequested):
            become(.connecting(then: .close))
            failPendingReads(closedLocallyError)
        case (.connecting, .deadlinePassed):
            enterClosed(LoopError("connecting to \(remoteAddress) timed out", systemError: ETIMEDOUT))
        case (.connecting, _):
            break

        case (.open(_, let output), .peerEnded):
            if output == .shut {
                enterClosed(nil)
            } else if switches.contains(.allowsHalfClosure) {
                become(.open(input: .ended, output: output))
            } else {
                become(.closing(input: .ended, cause: .stream))
                closeIfDrained()
            }
        case (.open(let input, .open), .shutdownRequested):
            become(.open(input: input, output: .shutAfterFlush))
            closeIfDrained()
        case (.open(let input, _), .closeRequested):
            become(.closing(input: input, cause: .local))
            // Nothing more is read: waiting reads end here.
            failPendingReads(closedLocallyError)
            closeIfDrained()
        case (.open(let input, .shutAfterFlush), .outputDrained):
            Platform.shutdownOutput(fileDescriptor)
            if input == .ended { enterClosed(nil) } else { become(.open(input: input, output: .shut)) }
        case (.open, .deadlinePassed):
            guard let idle = withSettings({ $0.idleTimeout }) else { break }
            if idleFor >= idle {
                enterClosed(
                    LoopError("the connection to \(remoteAddress) was idle for \(idle)", systemError: ETIMEDOUT))
            } else {
                armDeadline()
            }
        case (.open, _):
            break

        case (.closing(_, let cause), .peerEnded):
            become(.closing(input: .ended, cause: cause))
            closeIfDrained()
        case (.lingering, .peerEnded):
            // Everything was sent, and now the peer has ended its stream too.
            enterClosed(nil)
        case (.closing(let input, _), .outputDrained):
            // Everything is out. The peer already ended its stream (or sent more than a closing
            // connection drops): close. Otherwise end ours and wait for the peer's.
            guard input == .open else {
                enterClosed(nil)
                break
            }
            Platform.shutdownOutput(fileDescriptor)
            become(.lingering)
            armDeadline(at: .now + LoopConnection.lingerTime)
        case (.lingering, .deadlinePassed):
            // The peer had its time; everything was sent.
            enterClosed(nil)
        case (.closing, _), (.lingering, _):
            break
        }
    }

    /// A change is about to end this side's stream: an open output lets the transport end its own
    /// first (TLS: close_notify, so that the peer reads it before the FIN).
    private func outputWillEnd() {
        guard case .open(_, .open) = core.lifecycle else { return }
        transport.outputWillEnd(for: self)
    }

    /// Moves the lifecycle to `next`, a step the table allows (checked in debug builds).
    private func become(_ next: Lifecycle) {
        core.lifecycle.become(next)
    }

    /// Applies `outputDrained` if nothing is queued.
    private func closeIfDrained() {
        if queuedBytes == 0 { apply(.outputDrained) }
    }

    /// Closes at once (the descriptor once libevent has let go), reports `closed` once, and lets
    /// waiting calls and handlers go.
    private func enterClosed(_ error: LoopError?, cause: Cause? = nil) {
        let wasConnecting = isConnecting
        // Closed locally if `close()` came first (or `abort()` closes it now).
        let cause = cause ?? core.lifecycle.cause
        become(.closed(cause: cause, report: .untold))
        openState.store(false, ordering: .releasing)
        core.closedError = error
        descriptorSource.invalidate()
        let ended = error ?? LoopError("the connection to \(remoteAddress) is closed")
        if let error {
            failPendingReads(error)
        } else if cause == .local {
            failPendingReads(closedLocallyError)
        } else {
            for read in core.pendingReads { read.continuation.resume(returning: []) }
            core.pendingReads.removeAll()
        }
        output.close(failingWritersWith: ended, count: queuedCount)
        // A handler set after the peer's end of stream and not told yet hears it before the close.
        tellUnheardReadClosed()
        let completion = core.connectCompletion
        core.connectCompletion = nil
        let handler = core.eventHandler
        core.eventHandler = nil
        core.readHandler = nil
        if handler != nil || wasConnecting { _ = core.lifecycle.tellClose() }
        leaveLoop()
        if wasConnecting {
            completion?(.failure(ended))
        } else {
            handler?(self, .closed(error))
        }
    }
}
