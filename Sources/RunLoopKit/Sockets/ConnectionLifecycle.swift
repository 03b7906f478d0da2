import Glibc

// The connection's lifecycle: one value, changed in one place (`LoopConnection.apply(_:)`,
// `LoopConnection+Lifecycle.swift`), which takes every close, half-close, timeout and reset
// decision; each step is checked against the table in debug builds. Loop thread only.
//
// | from | change | to | effect |
// |---|---|---|---|
// | `connecting(r)` | `connected` | `open(open, open)`; `r` shutdown: `open(open, shutAfterFlush)`; `r` close: `closing(open, local)` | the completion gets the connection |
// | `connecting(_)` | `shutdownRequested`, `closeRequested` | `connecting(shutdown)`, `connecting(close)` | (applied once connected) |
// | `open(i, o)` | `peerEnded` | `o` shut: `closed`; `allowsHalfClosure`: `open(ended, o)`; else `closing(ended, stream)` | `readClosed` (once) |
// | `open(i, open)` | `shutdownRequested` | `open(i, shutAfterFlush)` | |
// | `open(i, o)` | `closeRequested` | `closing(i, local)` | waiting reads fail |
// | `open(i, shutAfterFlush)` | `outputDrained` | `i` ended: `closed`; else `open(i, shut)` | FIN |
// | `closing(i, c)` | `outputDrained` | `i` ended: `closed`; else `lingering` | FIN, linger deadline |
// | `closing(_, c)`, `lingering` | `peerEnded` (or too much input dropped) | `closing(ended, c)`; `closed` if nothing is queued | |
// | `lingering` | `deadlinePassed` | `closed` | (everything was sent: orderly) |
// | `open(_, _)` | `deadlinePassed` | idle for `idleTimeout`: `closed(ETIMEDOUT)`; else the same | |
// | `connecting(_)` | `deadlinePassed` | `closed(ETIMEDOUT)` | the completion gets the error |
// | any but `closed` | `failed(e)` | `closed(e)` | |
// | any but `closed` | `aborted` | `closed` | RST (queued output dropped) |
// | any but `closed` | `sourceInvalidated` | `closed`: orderly if `lingering`, else the source's error | |
// | `closed` | any | `closed` | nothing |
//
// `closed` means `closed(c, r)`: `c` is `local` when `close()` or `abort()` came first (from
// `connecting(close)`, `closing(_, local)` or `lingering`, or by `aborted`), else `stream`; `r` is
// `told` once a handler (or the connect's completion) was told of the close, else `untold`, and
// `closed(c, untold)` goes to `closed(c, told)` when the next `onEvent` handler is told.
//
// Entering `closed` (`enterClosed`): the descriptor goes (once libevent has let go), waiting
// calls end, handlers are let go and `closed` is reported exactly once (after a `readClosed` that
// no handler was told yet, if there is one: see `onEvent`).

extension LoopConnection {
    /// The lifecycle (see the table above).
    enum Lifecycle: CheckedStep {
        /// Connecting; what `shutdownOutput()` or `close()` asked for meanwhile.
        case connecting(then: Request)
        case open(input: Input, output: Output)
        /// `close()` was called (`local`), or the peer ended its stream without half-closure
        /// (`stream`): nothing more is taken, the queued output is flushed, then the end of
        /// stream sent.
        case closing(input: Input, cause: Cause)
        /// Closing after `close()`, with the output out and the end of stream sent: waiting for
        /// the peer's, for `lingerTime` at most.
        case lingering
        /// Closed, by `close()` or `abort()` (`local`) or not; told to a handler or not yet.
        case closed(cause: Cause, report: CloseReport)
    }

    /// Whether `close()` or `abort()` ended the connection (`local`: reads throw once the input
    /// is used up), or the stream did (the peer's end, a failure, a timeout).
    enum Cause: Equatable, CaseIterable { case local, stream }

    /// Whether a handler (or the connect's completion) was told of the close.
    enum CloseReport: Equatable, CaseIterable { case untold, told }

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
}

extension LoopConnection.Lifecycle: CaseIterable {
    typealias Input = LoopConnection.Input
    typealias Output = LoopConnection.Output
    typealias Cause = LoopConnection.Cause

    /// Every state (the check's test walks them all).
    static let allCases: [Self] =
        [.connecting(then: .none), .connecting(then: .shutdown), .connecting(then: .close)]
        + [Input.open, .ended].flatMap { input in
            [Output.open, .shutAfterFlush, .shut].map { Self.open(input: input, output: $0) }
        }
        + [Input.open, .ended].flatMap { input in Cause.allCases.map { Self.closing(input: input, cause: $0) } }
        + [.lingering]
        + Cause.allCases.flatMap { cause in
            LoopConnection.CloseReport.allCases.map { Self.closed(cause: cause, report: $0) }
        }

    /// Whether `close()` or `abort()` came first: the cause the connection closes with.
    var cause: Cause {
        switch self {
        case .connecting(then: .close), .closing(_, .local), .lingering, .closed(.local, _): .local
        default: .stream
        }
    }

    /// Whether the lifecycle may go from `from` to `next` (the table above), checked in debug
    /// builds.
    static func mayChange(_ from: Self, to next: Self) -> Bool {
        switch (from, next) {
        case (.closed(let cause, let report), .closed(let newCause, let newReport)):
            return cause == newCause && report == .untold && newReport == .told
        case (.closed, _): return false
        case (_, .closed(let cause, let report)): return report == .untold && (cause == .local || from.cause == .stream)
        case (.connecting(let request), .connecting(let newRequest)):
            return newRequest == .close || (request == .none && newRequest == .shutdown)
        case (.connecting(.none), .open(.open, .open)), (.connecting(.shutdown), .open(.open, .shutAfterFlush)),
            (.connecting(.close), .closing(.open, .local)):
            return true
        case (.open(let input, let output), .open(let newInput, let newOutput)):
            // One side at a time: the input ends, or the output moves on towards its end.
            let inputStep = input == newInput || newInput == .ended
            let outputStep =
                output == newOutput || (output == .open && newOutput == .shutAfterFlush)
                || (output == .shutAfterFlush && newOutput == .shut)
            return inputStep && outputStep && (input == newInput || output == newOutput)
        case (.open(_, let output), .closing(.ended, .stream)): return output != .shut
        case (.open(let input, _), .closing(let newInput, .local)): return input == newInput
        case (.closing(let input, let cause), .closing(let newInput, let newCause)):
            return cause == newCause && (input == newInput || newInput == .ended)
        case (.closing(.open, .local), .lingering): return true
        default: return false
        }
    }

    static let checkedName = "a connection's lifecycle"

    /// The close is being told (to the next `onEvent` handler): returns whether it was not yet.
    mutating func tellClose() -> Bool {
        guard case .closed(let cause, .untold) = self else { return false }
        become(.closed(cause: cause, report: .told))
        return true
    }
}
