import Testing

@testable import RunLoopKit

// A connection's loop-thread states, row by row of their tables: the lifecycle's steps (the
// table in ConnectionLifecycle.swift) and how far the peer's end of stream was told
// (ConnectionCore.swift).

@Suite struct ConnectionLifecycleTests {
    typealias Lifecycle = LoopConnection.Lifecycle
    typealias Input = LoopConnection.Input
    typealias Output = LoopConnection.Output
    typealias Cause = LoopConnection.Cause

    static let inputs: [Input] = [.open, .ended]
    static let outputs: [Output] = [.open, .shutAfterFlush, .shut]

    /// Every step the table takes, from each row.
    static var steps: [(Lifecycle, Lifecycle)] {
        var steps: [(Lifecycle, Lifecycle)] = [
            // Connecting: what is asked for meanwhile, then connected.
            (.connecting(then: .none), .connecting(then: .shutdown)),
            (.connecting(then: .none), .connecting(then: .close)),
            (.connecting(then: .shutdown), .connecting(then: .close)),
            (.connecting(then: .close), .connecting(then: .close)),
            (.connecting(then: .none), .open(input: .open, output: .open)),
            (.connecting(then: .shutdown), .open(input: .open, output: .shutAfterFlush)),
            (.connecting(then: .close), .closing(input: .open, cause: .local)),
            // Closing after `close()`, its output out: lingering.
            (.closing(input: .open, cause: .local), .lingering),
        ]
        for input in inputs {
            for output in outputs {
                let open = Lifecycle.open(input: input, output: output)
                // The peer's end again (half-closed), or the same step taken twice.
                steps.append((open, open))
                // `closeRequested`.
                steps.append((open, .closing(input: input, cause: .local)))
                // `peerEnded` without half-closure, while this side's end is not sent.
                if output != .shut { steps.append((open, .closing(input: .ended, cause: .stream))) }
            }
            // `shutdownRequested`, then `outputDrained`.
            steps.append((.open(input: input, output: .open), .open(input: input, output: .shutAfterFlush)))
            steps.append((.open(input: input, output: .shutAfterFlush), .open(input: input, output: .shut)))
        }
        // `peerEnded` with half-closure.
        for output in outputs {
            steps.append((.open(input: .open, output: output), .open(input: .ended, output: output)))
        }
        for cause in Cause.allCases {
            // `peerEnded` while closing.
            steps.append((.closing(input: .open, cause: cause), .closing(input: .open, cause: cause)))
            steps.append((.closing(input: .open, cause: cause), .closing(input: .ended, cause: cause)))
            steps.append((.closing(input: .ended, cause: cause), .closing(input: .ended, cause: cause)))
            // The close told to the next handler.
            steps.append((.closed(cause: cause, report: .untold), .closed(cause: cause, report: .told)))
        }
        // Into `closed`, untold: locally from every state, by the stream from those `close()` did
        // not come first in.
        let local: [Lifecycle] = [
            .connecting(then: .close), .closing(input: .open, cause: .local), .closing(input: .ended, cause: .local),
            .lingering,
        ]
        for state in Lifecycle.allCases {
            if case .closed = state { continue }
            steps.append((state, .closed(cause: .local, report: .untold)))
            if !local.contains(state) { steps.append((state, .closed(cause: .stream, report: .untold))) }
        }
        return steps
    }

    @Test func theCheckAllowsExactlyTheTablesSteps() {
        expectTheCheckAllowsExactly(ConnectionLifecycleTests.steps)
    }

    @Test func everyStateIsListedOnce() {
        let states = Lifecycle.allCases
        #expect(states.count == 18)
        for (index, state) in states.enumerated() { #expect(!states[(index + 1)...].contains(state), "\(state)") }
    }

    @Test func theCauseIsLocalOnceCloseCameFirst() {
        let local = Lifecycle.allCases.filter { $0.cause == .local }
        #expect(
            local == [
                .connecting(then: .close), .closing(input: .open, cause: .local),
                .closing(input: .ended, cause: .local), .lingering, .closed(cause: .local, report: .untold),
                .closed(cause: .local, report: .told),
            ])
    }

    typealias CloseRow = TransitionRow<Lifecycle, String, Bool>

    static let closeRows: [CloseRow] = [
        CloseRow(.closed(cause: .local, report: .untold), "tellClose", .closed(cause: .local, report: .told), true),
        CloseRow(.closed(cause: .stream, report: .untold), "tellClose", .closed(cause: .stream, report: .told), true),
        CloseRow(.closed(cause: .local, report: .told), "tellClose", .closed(cause: .local, report: .told), false),
        CloseRow(.closed(cause: .stream, report: .told), "tellClose", .closed(cause: .stream, report: .told), false),
        CloseRow(.open(input: .open, output: .open), "tellClose", .open(input: .open, output: .open), false),
    ]

    @Test(arguments: closeRows)
    func tellingTheClose(_ row: CloseRow) {
        var state = row.from
        #expect(state.tellClose() == row.outcome)
        #expect(state == row.to)
    }
}

@Suite struct EndOfStreamReportTests {
    enum Event: Sendable, CustomStringConvertible {
        case report(handler: Bool)
        case tell
        var description: String {
            switch self {
            case .report(let handler): "report(handler: \(handler))"
            case .tell: "tell"
            }
        }
    }

    typealias Row = TransitionRow<EndOfStreamReport, Event, Bool>

    /// Every row of the table in ConnectionCore.swift.
    static let rows: [Row] = [
        Row(.unreported, .report(handler: true), .heard, true),
        Row(.unreported, .report(handler: false), .unheard, false),
        Row(.unheard, .report(handler: true), .unheard, false),
        Row(.unheard, .report(handler: false), .unheard, false),
        Row(.heard, .report(handler: true), .heard, false),
        Row(.heard, .report(handler: false), .heard, false),
        Row(.unheard, .tell, .heard, true),
        Row(.unreported, .tell, .unreported, false),
        Row(.heard, .tell, .heard, false),
    ]

    @Test(arguments: rows)
    func eachEventGoesWhereTheTableSays(_ row: Row) {
        var state = row.from
        let answer =
            switch row.event {
            case .report(let handler): state.report(handler: handler)
            case .tell: state.tell()
            }
        #expect(answer == row.outcome)
        #expect(state == row.to)
    }

    @Test func theCheckAllowsExactlyTheTablesSteps() {
        expectTheCheckAllowsExactly([
            (EndOfStreamReport.unreported, .heard), (.unreported, .unheard), (.unheard, .heard),
        ])
    }
}
