/// A connection's state on its loop's thread: its lifecycle (connecting, open with its input and
/// output sides, closing, lingering, closed: `LoopConnection+Lifecycle.swift`), its handlers, the delivery under way (`DeliveryGuard`), how far the peer's end of stream was told
/// (`EndOfStreamReport`), what the socket is watched for, and the state few connections have.
/// Each state is one value, changed by steps its table allows (checked in debug builds): no flag
/// repeats what another says.
///
/// Owned by `LoopConnection` (`core`), touched on the loop's thread only: every path to it passes
/// `assertOnLoopThread()` (the descriptor's events, the lifecycle's changes, reads, writes,
/// flushes and deliveries).
struct ConnectionCore {
    /// Changed only by `LoopConnection.apply(_:)`.
    var lifecycle: LoopConnection.Lifecycle
    var readHandler: ((LoopConnection, inout LoopBuffer) -> Void)?
    var eventHandler: ((LoopConnection, LoopConnection.Event) -> Void)?
    /// Inside `onRead` the input buffer is lent out, and reading waits; a nested run there that
    /// finds the socket readable stops watching it until `onRead` returns.
    var delivery = DeliveryGuard.idle
    /// Whether `readClosed` was reported, and heard.
    var endOfStream = EndOfStreamReport.unreported
    /// The last wake-up read less than `firstReadSize` (see there).
    var readsAreSmall = true
    var watched: LoopDescriptorSource.Events
    /// When bytes last moved, on the coarse clock (`LoopConnection.coarseNow`).
    var lastActivity = LoopConnection.coarseNow
    /// The state that most connections never set, or set for a while only (the connect's
    /// completion, awaited reads, the close's error and dropped bytes), made the first time one of
    /// them is: an idle connection holds none.
    private var rare: Rare?

    init(lifecycle: LoopConnection.Lifecycle, watched: LoopDescriptorSource.Events) {
        self.lifecycle = lifecycle
        self.watched = watched
    }

    /// An awaiting `read(maxLength:)` call, with the flag its task's cancellation sets, by which a
    /// cancellation finds its own call.
    typealias PendingRead = (
        maxLength: Int, flag: CancellationFlag, continuation: CheckedContinuation<[UInt8], any Error>
    )

    /// See `rare`.
    final class Rare {
        var connectCompletion: ((Result<LoopConnection, LoopError>) -> Void)?
        var pendingReads: [PendingRead] = []
        var closedError: LoopError?
        var discarded = 0

        var isEmpty: Bool { connectCompletion == nil && pendingReads.isEmpty && closedError == nil && discarded == 0 }
    }

    /// Whether the state made on first use is held.
    var holdsRare: Bool { rare != nil }

    /// The `rare` state, made now if it was not.
    private mutating func makeRare() -> Rare {
        if let rare { return rare }
        let made = Rare()
        rare = made
        return made
    }

    /// Connecting (or handshaking): what the connection's outcome is given to. Let go of the
    /// `rare` state with it when nothing else is set there, so that a connected client holds none.
    var connectCompletion: ((Result<LoopConnection, LoopError>) -> Void)? {
        get { rare?.connectCompletion }
        set {
            if newValue != nil {
                makeRare().connectCompletion = newValue
            } else if let rare {
                rare.connectCompletion = nil
                if rare.isEmpty { self.rare = nil }
            }
        }
    }

    /// Awaiting `read(maxLength:)` calls, in the order they were made.
    var pendingReads: [PendingRead] {
        get { rare?.pendingReads ?? [] }
        _modify {
            if let rare {
                yield &rare.pendingReads
            } else {
                var reads: [PendingRead] = []
                yield &reads
                if !reads.isEmpty { makeRare().pendingReads = reads }
            }
        }
    }

    /// Why the connection closed (nil: orderly), once it has.
    var closedError: LoopError? {
        get { rare?.closedError }
        set { if newValue != nil || rare != nil { makeRare().closedError = newValue } }
    }

    /// Closing: the bytes that arrived after `close()` and were dropped.
    var discarded: Int {
        get { rare?.discarded ?? 0 }
        set { if newValue != 0 || rare != nil { makeRare().discarded = newValue } }
    }
}

// How far the peer's end of stream (`readClosed`) was told. It is reported once: at the end of
// stream read, or noticed while not reading. A report with no `onEvent` handler set is kept for
// the next handler set (or for the close, which tells it first). Loop thread only.
//
// | from | event | to | answer |
// |---|---|---|---|
// | `unreported` | `report(handler: true)` | `heard` | true: tell the handler now |
// | `unreported` | `report(handler: false)` | `unheard` | false |
// | `unheard`, `heard` | `report(_)` | the same | false: reported once |
// | `unheard` | `tell` | `heard` | true: tell the handler now |
// | `unreported`, `heard` | `tell` | the same | false |

/// How far the peer's end of stream was told (see the table above).
enum EndOfStreamReport: CheckedStep, CaseIterable, Sendable {
    case unreported
    /// Reported while no `onEvent` handler was set: the next one set hears it.
    case unheard
    /// A handler was told.
    case heard

    /// The end of stream is to be reported (`handler`: whether an `onEvent` handler is set):
    /// returns whether to tell the handler now.
    mutating func report(handler: Bool) -> Bool {
        guard self == .unreported else { return false }
        become(handler ? .heard : .unheard)
        return handler
    }

    /// A handler is there to hear a report kept for it: returns whether to tell it now.
    mutating func tell() -> Bool {
        guard self == .unheard else { return false }
        become(.heard)
        return true
    }

    /// Whether the report may go from `from` to `next` (the table above), checked in debug builds.
    static func mayChange(_ from: EndOfStreamReport, to next: EndOfStreamReport) -> Bool {
        switch (from, next) {
        case (.unreported, .heard), (.unreported, .unheard), (.unheard, .heard): true
        default: false
        }
    }

    static let checkedName = "a connection's end-of-stream report"
}
