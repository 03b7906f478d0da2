import Testing

@testable import RunLoopKit

/// The delivery guard of connections and datagram sockets, driven directly: each row of its
/// transition table gives the state and the answer, and every step the table does not list is
/// refused by the check debug builds make.
@Suite struct DeliveryGuardTests {
    enum Event: Sendable {
        case begin
        case readable
        case end
    }

    /// The outcome: what the event function answers (deliver now, read now, or read again).
    typealias Row = TransitionRow<DeliveryGuard, Event, Bool>

    /// The table, row by row.
    static let rows: [Row] = [
        Row(.idle, .begin, .delivering, true),
        Row(.delivering, .begin, .delivering, false),
        Row(.deliveringWithReadablePending, .begin, .deliveringWithReadablePending, false),

        Row(.idle, .readable, .idle, true),
        Row(.delivering, .readable, .deliveringWithReadablePending, false),
        Row(.deliveringWithReadablePending, .readable, .deliveringWithReadablePending, false),

        Row(.delivering, .end, .idle, false),
        Row(.deliveringWithReadablePending, .end, .idle, true),
    ]

    @Test(arguments: rows)
    func eachRowOfTheTable(_ row: Row) {
        var state = row.from
        let answer =
            switch row.event {
            case .begin: state.begin()
            case .readable: state.readable()
            case .end: state.end()
            }
        #expect(state == row.to)
        #expect(answer == row.outcome)
        #expect(DeliveryGuard.mayChange(row.from, to: row.to))
    }

    /// The check allows exactly the steps of the table's rows: a readable event is remembered only
    /// during a delivery, and a delivery never starts over one under way.
    @Test func theCheckRefusesEveryStepNotInTheTable() {
        expectTheCheckAllowsExactly(Self.rows.map { ($0.from, $0.to) })
        #expect(!DeliveryGuard.mayChange(.idle, to: .deliveringWithReadablePending))
        #expect(!DeliveryGuard.mayChange(.deliveringWithReadablePending, to: .delivering))
    }

    /// What each state says to the code around it: whether a delivery is under way (the input is
    /// lent out) and whether a readable event waits for its end.
    @Test func whatEachStateSays() {
        for state in DeliveryGuard.allCases {
            #expect(state.isDelivering == (state != .idle))
            #expect(state.readableIsPending == (state == .deliveringWithReadablePending))
        }
    }

    /// A nested delivery and a nested readable event inside one delivery, as a handler that runs
    /// the loop meets them: neither goes ahead, and the end says to read again.
    @Test func aNestedRunDuringADelivery() {
        var state = DeliveryGuard.idle
        let answers = [state.begin(), state.begin(), state.readable(), state.readable(), state.end()]
        #expect(answers == [true, false, false, false, true])
        #expect(state == .idle)
        let afterwards = state.readable()
        #expect(afterwards)
    }

    /// On a real connection: an `onRead` handler that runs its loop again (a nested run) while
    /// more bytes arrive is not entered again meanwhile, and gets those bytes, in order, after it
    /// returns. The nested run does not spin on the readable socket it may not read: it stops
    /// watching it (a spinning run of 50 ms makes thousands of passes).
    @Test func aNestedRunInsideOnReadDoesNotReenterIt() throws {
        let loop = Loop.current
        let reads = Recorder<[UInt8]>()
        let clients = Recorder<LoopConnection>()
        let (inside, depths) = (SharedCount(), Recorder<Int>())
        let (passes, nestedPasses) = (SharedCount(), Recorder<Int>())
        let counter = LoopObserver(activities: .beforeSources) { _, _ in passes.add(1) }
        loop.add(counter, forMode: .default)
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { accepted in
            accepted.onRead { _, buffer in
                inside.add(1)
                defer { inside.add(-1) }
                depths.append(inside.value)
                let first = reads.count == 0
                reads.append(buffer.read(maxLength: buffer.count))
                guard first else { return }
                // The client's next bytes arrive while the nested run waits.
                for client in clients.events { client.enqueue([4, 5, 6]) }
                let before = passes.value
                loop.run(mode: .default, for: .milliseconds(50))
                nestedPasses.append(passes.value - before)
            }
        }
        loop.add(listener, forMode: .default)
        LoopConnection.connect(to: listener.localAddress, on: loop, inModes: [.default]) { result in
            guard let connection = try? result.get() else { return }
            clients.append(connection)
            connection.enqueue([1, 2, 3])
        }
        #expect(runLoop(loop, in: .default) { reads.events.joined().count == 6 })
        #expect(Array(reads.events.joined()) == [1, 2, 3, 4, 5, 6])
        #expect(depths.events.allSatisfy { $0 == 1 })
        #expect(nestedPasses.events.count == 1)
        #expect(nestedPasses.events.allSatisfy { $0 < 100 }, "\(nestedPasses.events)")
        for client in clients.events { client.close() }
        listener.invalidate()
        counter.invalidate()
    }
}
