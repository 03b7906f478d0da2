import Glibc

// The connection's lifecycle: one value, changed in one place (`apply(_:)`), which takes every
// close, half-close, timeout and reset decision. Loop thread only.
//
// | from | change | to | effect |
// |---|---|---|---|
// | `connecting(r)` | `connected` | `open(open, open)`; `r` shutdown: `open(open, shutAfterFlush)`; `r` close: `closing(open)` | the completion gets the connection |
// | `connecting(_)` | `shutdownRequested`, `closeRequested` | `connecting(shutdown)`, `connecting(close)` | (applied once connected) |
// | `open(i, o)` | `peerEnded` | `o` shut: `closed`; `allowsHalfClosure`: `open(ended, o)`; else `closing(ended)` | `readClosed` (once) |
// | `open(i, open)` | `shutdownRequested` | `open(i, shutAfterFlush)` | |
// | `open(i, o)` | `closeRequested` | `closing(i)` | waiting reads fail |
// | `open(i, shutAfterFlush)` | `outputDrained` | `i` ended: `closed`; else `open(i, shut)` | FIN |
// | `closing(i)` | `outputDrained` | `i` ended: `closed`; else `lingering` | FIN, linger deadline |
// | `closing(_)`, `lingering` | `peerEnded` (or too much input dropped) | `closing(ended)`; `closed` if nothing is queued | |
// | `lingering` | `deadlinePassed` | `closed` | (everything was sent: orderly) |
// | `open(_, _)` | `deadlinePassed` | idle for `idleTimeout`: `closed(ETIMEDOUT)`; else the same | |
// | `connecting(_)` | `deadlinePassed` | `closed(ETIMEDOUT)` | the completion gets the error |
// | any but `closed` | `failed(e)` | `closed(e)` | |
// | any but `closed` | `aborted` | `closed` | RST (queued output dropped) |
// | any but `closed` | `sourceInvalidated` | `closed`: orderly if `lingering`, else the source's error | |
// | `closed` | any | `closed` | nothing |
//
// Entering `closed` (`enterClosed`): the descriptor goes (once libevent has let go), waiting
// calls end, handlers are let go and `closed` is reported exactly once (after a `readClosed` that
// no handler was told yet, if there is one: see `onEvent`).

extension LoopConnection {
    /// The lifecycle (see the table above).
    enum Lifecycle: Equatable {
        /// Connecting; what `shutdownOutput()` or `close()` asked for meanwhile.
        case connecting(then: Request)
        case open(input: Input, output: Output)
        /// `close()` was called: nothing more is taken, the queued output is flushed, then the
        /// end of stream sent.
        case closing(input: Input)
        /// Closing, with the output out and the end of stream sent: waiting for the peer's, for
        /// `lingerTime` at most.
        case lingering
        case closed
    }

    /// The peer's side of the stream, as the connection reads it.
    enum Input: Equatable {
        case open
        /// The end of stream was read (or, closing, no more input is taken).
        case ended
    }

    /// This side of the stream.
    enum Output: Equatable {
        case open
        /// `shutdownOutput()`: the end of stream goes once the queue is empty.
        case shutAfterFlush
        /// The end of stream was sent.
        case shut
    }

    /// What `close()` or `shutdownOutput()` asked for before the connection was connected.
    enum Request: Equatable { case none, shutdown, close }

    /// What happened to the connection (see the table above).
    enum Change: CustomStringConvertible {
        case connected
        case peerEnded
        case shutdownRequested
        case closeRequested
        case outputDrained
        case deadlinePassed
        case failed(LoopError)
        case aborted
        case sourceInvalidated

        var description: String {
            switch self {
            case .connected: "connected"
            case .peerEnded: "peerEnded"
            case .shutdownRequested: "shutdownRequested"
            case .closeRequested: "closeRequested"
            case .outputDrained: "outputDrained"
            case .deadlinePassed: "deadlinePassed"
            case .failed(let error): "failed(\(error))"
            case .aborted: "aborted"
            case .sourceInvalidated: "sourceInvalidated"
            }
        }
    }

    /// Whether the lifecycle may go from `self` to `next` (the table above), checked in debug
    /// builds.
    static func mayChange(_ from: Lifecycle, to next: Lifecycle) -> Bool {
        switch (from, next) {
        case (.closed, let next): return next == .closed
        case (_, .closed): return true
        case (.connecting, .connecting), (.connecting, .open(.open, _)), (.connecting, .closing(.open)): return true
        case (.open(let input, let output), .open(let newInput, let newOutput)):
            return (input == newInput || newInput == .ended) && (output == newOutput || newOutput != .open)
        case (.open, .closing): return true
        case (.closing(let input), .closing(let newInput)): return input == newInput || newInput == .ended
        case (.closing(.open), .lingering), (.lingering, .lingering): return true
        default: return false
        }
    }

    // MARK: Reading the lifecycle

    var isConnecting: Bool { if case .connecting = lifecycle { true } else { false } }
    var isClosed: Bool { lifecycle == .closed }
    /// `close()` was called and the connection has not closed yet.
    var isClosing: Bool {
        switch lifecycle {
        case .closing, .lingering: true
        default: false
        }
    }
    /// Whether the peer's end of stream was read (or, closing, no more input is taken).
    var inputEnded: Bool {
        switch lifecycle {
        case .open(.ended, _), .closing(.ended), .closed: true
        default: false
        }
    }
    /// Whether writes are taken: connecting or open, and neither closing nor shut down.
    var acceptsOutput: Bool {
        switch lifecycle {
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
        case .peerEnded where !halfClosureSetting.load(ordering: .relaxed): outputWillEnd()
        default: break
        }
        switch (lifecycle, change) {
        case (.closed, _):
            return
        case (_, .failed(let error)):
            enterClosed(error)
        case (_, .aborted):
            closedLocally = true
            Platform.resetOnClose(fileDescriptor)
            enterClosed(nil)
        case (_, .sourceInvalidated):
            // Closing, with everything sent and the end of stream too: an orderly close all the same.
            let delivered = lifecycle == .lingering && descriptorSource.error == nil
            enterClosed(
                delivered
                    ? nil
                    : descriptorSource.error ?? LoopError("the loop of the connection to \(remoteAddress) has ended"))

        case (.connecting(let request), .connected):
            switch request {
            case .none: become(.open(input: .open, output: .open))
            case .shutdown: become(.open(input: .open, output: .shutAfterFlush))
            case .close: become(.closing(input: .open))
            }
        case (.connecting(let request), .shutdownRequested):
            if request == .none { become(.connecting(then: .shutdown)) }
        case (.connecting, .closeRequested):
            closedLocally = true
            become(.connecting(then: .close))
            failPendingReads(closedLocallyError)
        case (.connecting, .deadlinePassed):
            enterClosed(LoopError("connecting to \(remoteAddress) timed out", systemError: ETIMEDOUT))
        case (.connecting, _):
            break

        case (.open(_, let output), .peerEnded):
            if output == .shut {
                enterClosed(nil)
            } else if halfClosureSetting.load(ordering: .relaxed) {
                become(.open(input: .ended, output: output))
            } else {
                become(.closing(input: .ended))
                closeIfDrained()
            }
        case (.open(let input, .open), .shutdownRequested):
            become(.open(input: input, output: .shutAfterFlush))
            closeIfDrained()
        case (.open(let input, _), .closeRequested):
            closedLocally = true
            become(.closing(input: input))
            // Nothing more is read: waiting reads end here.
            failPendingReads(closedLocallyError)
            closeIfDrained()
        case (.open(let input, .shutAfterFlush), .outputDrained):
            Platform.shutdownOutput(fileDescriptor)
            if input == .ended { enterClosed(nil) } else { become(.open(input: input, output: .shut)) }
        case (.open, .deadlinePassed):
            guard let idle = withShared({ $0.idleTimeout }) else { break }
            if idleFor >= idle {
                enterClosed(
                    LoopError("the connection to \(remoteAddress) was idle for \(idle)", systemError: ETIMEDOUT))
            } else {
                armDeadline()
            }
        case (.open, _):
            break

        case (.closing, .peerEnded):
            become(.closing(input: .ended))
            closeIfDrained()
        case (.lingering, .peerEnded):
            // Everything was sent, and now the peer has ended its stream too.
            enterClosed(nil)
        case (.closing(let input), .outputDrained):
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
        guard case .open(_, .open) = lifecycle else { return }
        transport.outputWillEnd(for: self)
    }

    /// Moves the lifecycle to `next`, a step the table allows (checked in debug builds).
    private func become(_ next: Lifecycle) {
        assert(
            LoopConnection.mayChange(lifecycle, to: next),
            "RunLoopKit: a connection may not go from \(lifecycle) to \(next)")
        lifecycle = next
    }

    /// Applies `outputDrained` if nothing is queued.
    private func closeIfDrained() {
        if queuedBytes == 0 { apply(.outputDrained) }
    }

    /// Closes at once (the descriptor once libevent has let go), reports `closed` once, and lets
    /// waiting calls and handlers go.
    private func enterClosed(_ error: LoopError?) {
        let wasConnecting = isConnecting
        become(.closed)
        openState.store(false, ordering: .releasing)
        closedError = error
        descriptorSource.invalidate()
        let ended = error ?? LoopError("the connection to \(remoteAddress) is closed")
        if let error {
            failPendingReads(error)
        } else if closedLocally {
            failPendingReads(closedLocallyError)
        } else {
            for read in pendingReads { read.continuation.resume(returning: []) }
            pendingReads.removeAll()
        }
        output.close(failingWritersWith: ended, count: queuedCount)
        // A handler set after the peer's end of stream and not told yet hears it before the close.
        tellUnheardReadClosed()
        let completion = connectCompletion
        connectCompletion = nil
        let handler = eventHandler
        eventHandler = nil
        readHandler = nil
        closedReported = handler != nil || wasConnecting
        leaveLoop()
        if wasConnecting {
            completion?(.failure(ended))
        } else {
            handler?(self, .closed(error))
        }
    }
}
