import Testing

@testable import RunLoopKit

/// The datagram socket's send side, driven directly: each row of its transition table gives the
/// state and the effect, and every step the table does not list is refused by the check debug
/// builds make.
@Suite struct DatagramSendStateTests {
    typealias SendState = LoopDatagramSocket.SendState

    /// What happens to the send side.
    enum SendEvent: Sendable, CustomStringConvertible {
        case datagramsWaiting(inLoop: Bool)
        case flushBegan(hasWork: Bool)
        case batchSent(blocked: Bool, open: Bool)
        case becameWritable

        func apply(to state: inout SendState) -> SendState.Effect {
            switch self {
            case .datagramsWaiting(let inLoop): state.datagramsWaiting(inLoop: inLoop)
            case .flushBegan(let hasWork): state.flushBegan(hasWork: hasWork)
            case .batchSent(let blocked, let open): state.batchSent(blocked: blocked, open: open)
            case .becameWritable: state.becameWritable()
            }
        }

        var description: String {
            switch self {
            case .datagramsWaiting(let inLoop): "datagramsWaiting(inLoop: \(inLoop))"
            case .flushBegan(let hasWork): "flushBegan(hasWork: \(hasWork))"
            case .batchSent(let blocked, let open): "batchSent(blocked: \(blocked), open: \(open))"
            case .becameWritable: "becameWritable"
            }
        }
    }

    typealias SendRow = TransitionRow<SendState, SendEvent, SendState.Effect>

    /// The send side's table, row by row.
    static let sendRows: [SendRow] = [
        SendRow(.idle, .datagramsWaiting(inLoop: true), .flushPosted, .postFlush),
        SendRow(.idle, .datagramsWaiting(inLoop: false), .idle, .none),
        SendRow(.flushPosted, .datagramsWaiting(inLoop: true), .flushPosted, .none),
        SendRow(.flushing, .datagramsWaiting(inLoop: true), .flushing, .none),
        SendRow(.waitingForWritable, .datagramsWaiting(inLoop: true), .waitingForWritable, .none),

        SendRow(.idle, .flushBegan(hasWork: true), .flushing, .sendBatch),
        SendRow(.flushPosted, .flushBegan(hasWork: true), .flushing, .sendBatch),
        SendRow(.flushing, .flushBegan(hasWork: true), .flushing, .sendBatch),
        SendRow(.idle, .flushBegan(hasWork: false), .idle, .none),
        SendRow(.flushPosted, .flushBegan(hasWork: false), .idle, .none),
        SendRow(.flushing, .flushBegan(hasWork: false), .idle, .none),
        SendRow(.waitingForWritable, .flushBegan(hasWork: true), .waitingForWritable, .none),

        SendRow(.flushing, .batchSent(blocked: false, open: true), .flushing, .flush),
        SendRow(.flushing, .batchSent(blocked: false, open: false), .flushing, .flush),
        SendRow(.flushing, .batchSent(blocked: true, open: true), .waitingForWritable, .waitForWritable),
        SendRow(.flushing, .batchSent(blocked: true, open: false), .idle, .discardBatch),

        SendRow(.waitingForWritable, .becameWritable, .idle, .flush),
        SendRow(.idle, .becameWritable, .idle, .flush),
        SendRow(.flushPosted, .becameWritable, .flushPosted, .flush),
    ]

    @Test(arguments: sendRows)
    func eachRowOfTheSendTable(_ row: SendRow) {
        var state = row.from
        let effect = row.event.apply(to: &state)
        #expect(state == row.to)
        #expect(effect == row.outcome)
        #expect(SendState.mayChange(row.from, to: row.to))
    }

    /// The debug check allows exactly the steps of the table's rows: `idle` never waits for
    /// writable without a batch sent, a waiting queue is not flushed before the socket is
    /// writable, and a running flush is not posted again.
    @Test func theSendCheckRefusesEveryStepNotInTheTable() {
        expectTheCheckAllowsExactly(Self.sendRows.map { ($0.from, $0.to) })
        #expect(!SendState.mayChange(.idle, to: .waitingForWritable))
        #expect(!SendState.mayChange(.waitingForWritable, to: .flushing))
        #expect(!SendState.mayChange(.flushing, to: .flushPosted))
    }

    /// Only an idle send side lets a datagram go straight to the kernel; only one waiting for
    /// room watches for writable.
    @Test func whatTheSendStateAllows() {
        for state in SendState.allCases {
            #expect(state.sendsDirectly == (state == .idle))
            #expect(state.wantsWritable == (state == .waitingForWritable))
        }
    }
}
