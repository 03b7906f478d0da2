import Glibc
import Synchronization

/// A connected stream socket (TCP or Unix-domain) served by a loop: reads into an input buffer
/// handed to `onRead`, writes through an output queue flushed when the socket is writable.
///
/// Every member may be called from any thread. Calls made off the loop's thread are applied on
/// it (through `perform`, in the connection's modes), in each calling thread's order; handlers
/// run on the loop's thread in the connection's modes and count as handled sources. An accepted
/// connection starts on its listener's loop in its listener's modes; a connected one on the loop
/// and in the modes given to `connect`. While no running mode holds it, nothing is lost: input
/// waits in the kernel, output stays queued.
///
/// Writing: the connection's first write in a pass of its loop tries the socket at once when
/// nothing is queued; the writes after it in the same pass are gathered and sent together, with
/// one `writev`, when the pass ends (or before the loop sleeps, or once 256 KiB are gathered).
/// What the socket did not take is queued and flushed with `writev` when the socket becomes
/// writable (watched only while output is queued). When the queue reaches the high watermark
/// `isWritable` turns false; once it falls to the low one the connection reports `.writable`.
/// Writes never raise SIGPIPE; a write to a connection that is closing or closed is dropped (the
/// connection reports, or has reported, `closed`).
///
/// Reading: bytes go to the input buffer, and `onRead` gets everything not consumed yet. Bytes
/// that arrive before `onRead` is set are kept and delivered when it is, and the `readClosed` and
/// `closed` that came before `onEvent` is set are told to it when it is. With `isReadingPaused`,
/// or once `inputLimit` bytes wait unconsumed, the connection stops reading: the kernel's window
/// fills and the peer is slowed down, so memory stays bounded. A connection that is not reading
/// still learns of a reset at once (it closes with `ECONNRESET`) and reports the peer's end of
/// stream (`readClosed`) as soon as it arrives, whatever input still waits. Paused, that input
/// stays for when reading resumes; stalled by an `onRead` that left the full buffer, it is dropped
/// (read to its end, so the peer gets an orderly end, not a reset) and the connection ends as at
/// any end of stream. The peer's end of stream waits behind bytes its kernel still holds for the
/// full window: `idleTimeout` bounds how long a stalled connection waits for a peer that left.
///
/// Closing: at the peer's end of stream the connection reports `readClosed`, then (unless
/// `allowsHalfClosure`) flushes its output and closes. `close()` is graceful (the peer gets every
/// byte written before it, then the end of stream); `abort()` resets. `closed` is reported exactly once, with nil
/// for an orderly close and a `LoopError` otherwise (`systemError` set for resets, refusals and
/// timeouts: `ECONNRESET`, `ECONNREFUSED`, `ETIMEDOUT`). A loop keeps a connection it holds alive
/// until it closes or leaves every mode; a connection in no mode that nothing references closes.
public final class LoopConnection: LoopResident, @unchecked Sendable {
    // @unchecked: the mutable state below the "Loop thread only" mark is touched on the loop's
    // thread only; the rest is immutable, atomic or guarded by `sharedLock`.

    /// What a connection reports besides its input.
    public enum Event: Sendable, Equatable {
        /// The queued output fell to the low watermark after reaching the high one.
        case writable
        /// The peer finished sending (end of stream); writing may go on. Reported once, when the
        /// end of stream is read or, while the connection is not reading (paused, or stalled at
        /// its input limit), as soon as it arrives: input the peer sent before it may still wait.
        case readClosed
        /// Fully closed: nil for an orderly close, else why (reset, refusal, timeout, ...).
        case closed(LoopError?)
    }

    /// The address of this end.
    ///
    /// Any thread.
    public let localAddress: SocketAddress
    /// The address of the peer.
    ///
    /// Any thread.
    public let remoteAddress: SocketAddress

    /// The loop serving the connection, retained: set in `init` for accepted and connected ones,
    /// and when its process is added to a loop for a child's standard stream.
    let boundLoop: Atomic<Unmanaged<Loop>?>
    /// What few connections have: a child's stream's early calls, a TLS connection's engine. Set
    /// once, at the first need (in `init` for a child's stream), and never replaced.
    private let extrasSlot = OnceReference<Extras>()
    /// Set once, in `init`, before the item is shared.
    private var sourceSlot: LoopDescriptorSource! = nil
    var descriptorSource: LoopDescriptorSource { sourceSlot }

    /// What any thread reads and writes under `sharedLock`.
    struct Shared {
        var residency: Residency
        /// The settings most connections leave alone, made the first time one is set.
        private var settings: Settings?

        /// `writeWatermarks` as set (the loop thread works with its own copy, `output.watermarks`).
        var watermarks: (low: Int, high: Int) {
            get { settings?.watermarks ?? LoopConnection.defaultWriteWatermarks }
            set { changeSettings { $0.watermarks = newValue } }
        }

        var idleTimeout: Duration? {
            get { settings?.idleTimeout }
            set { changeSettings { $0.idleTimeout = newValue } }
        }

        init(residency: Residency) { self.residency = residency }

        var hasSettings: Bool { settings != nil }

        private mutating func changeSettings(_ body: (Settings) -> Void) {
            if settings == nil { settings = Settings() }
            body(settings!)
        }
    }

    /// `writeWatermarks` and `idleTimeout` as set, guarded by `sharedLock` as `Shared` is.
    final class Settings {
        var watermarks = LoopConnection.defaultWriteWatermarks
        var idleTimeout: Duration?
    }

    /// Guarded by `sharedLock`, a lock word in the connection rather than a `Locked` (a pthread
    /// mutex in an allocation of its own): a server holds thousands of connections, mostly idle
    /// (docs/performance-notes.md#memory-per-connection).
    @exclusivity(unchecked) private var shared: Shared
    private let sharedLock = LockWord()

    // The flags are declared next to each other, and next to the lock word: one word for all
    // (the stored layout is in declaration order, and a server holds many idle connections).

    /// The settings read on every event, as atomics: the loop thread reads them without a lock.
    let readingPausedSetting = Atomic<Bool>(false)
    let halfClosureSetting = Atomic<Bool>(false)
    /// `pausesReadingWhileUnwritable` (`LoopConnection+Backpressure.swift`).
    let unwritablePauseSetting = Atomic<Bool>(false)
    /// `isOpen`: set when the connection is connected, cleared as it closes.
    let openState: Atomic<Bool>
    let fileDescriptor: Int32
    let inputLimitSetting = Atomic<Int>(LoopConnection.defaultInputLimit)
    /// See `extrasSlot`: any thread.
    final class Extras: Sendable {
        /// A child's stream only: the calls made before it had a loop, applied there once it has one.
        let early: Locked<EarlyCalls>?
        /// The TLS filter over the socket: set once, on the loop's thread, when the connection
        /// starts TLS (`LoopConnection+TLS.swift`).
        let filter = OnceReference<TLSTransport>()

        init(early: Locked<EarlyCalls>?) { self.early = early }
    }

    /// The extras, made now if they were not.
    private func makeExtras() -> Extras {
        if let extras = extrasSlot.load() { return extras }
        return extrasSlot.storeIfNil(Extras(early: nil))
    }

    private var early: Locked<EarlyCalls>? { extrasSlot.load()?.early }

    /// The transport the connection's I/O goes through: its socket, or a TLS filter over it. Two
    /// inlined loads (no field of its own: an idle plaintext connection does not pay for it).
    /// Loop thread.
    var transport: StreamTransport {
        @inline(__always) get {
            if let filter = extrasSlot.load()?.filter.load() { return .tls(filter) }
            return .socket(SocketTransport(descriptor: fileDescriptor))
        }
    }

    /// The TLS filter's slot (`LoopConnection+TLS.swift`), in the extras.
    var filterSlot: FilterSlot { FilterSlot(connection: Unmanaged.passUnretained(self)) }

    /// `filterSlot`: the `AtomicLazyReference` calls the TLS code makes, on the extras' slot.
    struct FilterSlot {
        // Unretained and unmanaged: the slot is used within a call on the connection, which holds
        // it, and reading an `unowned(unsafe)` reference retained it on every read and write
        // (docs/performance-notes.md#instructions-per-request).
        let connection: Unmanaged<LoopConnection>

        func load() -> TLSTransport? { connection._withUnsafeGuaranteedRef { $0.extrasSlot.load()?.filter.load() } }

        @discardableResult
        func storeIfNil(_ filter: TLSTransport) -> TLSTransport {
            connection._withUnsafeGuaranteedRef { $0.makeExtras().filter.storeIfNil(filter) }
        }
    }

    /// The default `writeWatermarks`: 64 KiB and 256 KiB.
    public static let defaultWriteWatermarks = (low: 64 * 1024, high: 256 * 1024)

    /// The default `inputLimit`: 1 MiB.
    public static let defaultInputLimit = 1 << 20

    // MARK: Loop thread only

    // Touched only on the loop's thread, so the runtime's exclusivity checks (a thread-local
    // access set, entered and left on every access) are redundant: `@exclusivity(unchecked)`.
    // They were a large share of a request's instructions, most of them in this class
    // (docs/performance-notes.md#instructions-per-request).

    /// Connecting, open, closing or closed (`LoopConnection+Lifecycle.swift`): changed only by
    /// `apply(_:)`.
    @exclusivity(unchecked) var lifecycle: Lifecycle
    /// `close()` or `abort()` was called: reads throw once the input is used up (the peer's end
    /// of stream alone gives `[]`). Beside `lifecycle`, in the rest of its word.
    @exclusivity(unchecked) var closedLocally = false
    /// Nothing is allocated for it until bytes arrive.
    @exclusivity(unchecked) var input = LoopBuffer()
    @exclusivity(unchecked) var readHandler: ((LoopConnection, inout LoopBuffer) -> Void)?
    @exclusivity(unchecked) var eventHandler: ((LoopConnection, Event) -> Void)?
    /// The bytes queued, as the output last recorded them (`outputBufferedBytes`): written by the
    /// loop's thread, read by any.
    let queuedCount = Atomic<Int>(0)
    /// The output queue, the watermarks and the writers waiting below them; reached through
    /// `output` (loop thread).
    @exclusivity(unchecked) private var outputState = ConnectionOutput()
    /// Whether the output is below the high watermark (`isWritable`): false from when it reaches
    /// the high watermark until it falls to the low one. Written by the loop's thread, read by
    /// any. With the flags after it, it fills the end of the output's last word.
    let belowHighWatermark = Atomic<Bool>(true)
    /// `readClosed` was reported: at the end of stream read, or noticed while not reading.
    @exclusivity(unchecked) var endOfStreamReported = false
    /// `readClosed` was reported while no `onEvent` handler was set: the next one set gets it.
    @exclusivity(unchecked) var readClosedUnheard = false
    /// Whether a handler was told of the close.
    @exclusivity(unchecked) var closedReported = false
    /// Inside `onRead` the input buffer is lent out, and reading waits; a nested run there that
    /// finds the socket readable stops watching it until `onRead` returns.
    @exclusivity(unchecked) var delivery = DeliveryGuard.idle
    /// The last wake-up read less than `firstReadSize` (see there).
    @exclusivity(unchecked) var readsAreSmall = true
    @exclusivity(unchecked) var watched: LoopDescriptorSource.Events
    /// When bytes last moved, on the coarse clock (`LoopConnection.coarseNow`).
    @exclusivity(unchecked) var lastActivity = LoopConnection.coarseNow
    /// The loop thread's state that most connections never set, or set for a while only (the
    /// connect's completion, awaited reads, the close's error and dropped bytes), made the first
    /// time one of them is: an idle connection holds none.
    @exclusivity(unchecked) private var rare: Rare?

    /// An awaiting `read(maxLength:)` call, with the flag its task's cancellation sets, by which a
    /// cancellation finds its own call.
    typealias PendingRead = (
        maxLength: Int, flag: CancellationFlag, continuation: CheckedContinuation<[UInt8], any Error>
    )

    /// See `rare`: loop thread only.
    final class Rare {
        var connectCompletion: ((Result<LoopConnection, LoopError>) -> Void)?
        var pendingReads: [PendingRead] = []
        var closedError: LoopError?
        var discarded = 0
    }

    /// Whether the connection holds any of the state made on first use (`rare`, `extrasSlot`,
    /// `Shared.settings`): none while it is idle with its defaults. Loop thread only.
    var holdsOptionalState: Bool {
        assertOnLoopThread()
        return rare != nil || extrasSlot.load() != nil || withShared { $0.hasSettings }
    }

    /// The `rare` state, made now if it was not.
    private func makeRare() -> Rare {
        if let rare { return rare }
        let made = Rare()
        rare = made
        return made
    }

    /// Connecting: what the connection's outcome is given to. Let go of the `rare` state with it
    /// when nothing else is set there, so that a connected client holds none.
    var connectCompletion: ((Result<LoopConnection, LoopError>) -> Void)? {
        get { rare?.connectCompletion }
        set {
            if newValue != nil {
                makeRare().connectCompletion = newValue
            } else if let rare {
                rare.connectCompletion = nil
                if rare.pendingReads.isEmpty && rare.closedError == nil && rare.discarded == 0 { self.rare = nil }
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

    struct EarlyCalls {
        var calls: [@Sendable (LoopConnection) -> Void] = []
        /// The calls were handed to the loop: later ones go to it directly.
        var handedOver = false
    }

    init(
        descriptor: Int32, local: SocketAddress, remote: SocketAddress, loop: Loop?, modes: [Loop.Mode] = [],
        connecting: Bool
    ) {
        fileDescriptor = descriptor
        localAddress = local
        remoteAddress = remote
        boundLoop = Atomic(loop.map { Unmanaged.passRetained($0) })
        if loop == nil { _ = extrasSlot.storeIfNil(Extras(early: Locked(EarlyCalls()))) }
        lifecycle = connecting ? .connecting(then: .none) : .open(input: .open, output: .open)
        openState = Atomic(!connecting)
        shared = Shared(residency: Residency(loop: loop, modes: modes))
        watched = connecting ? .writable : .readable
        sourceSlot = LoopDescriptorSource(client: descriptor, events: watched)
    }

    /// A connection `LoopListener` accepted, on `loop`'s thread, about to join `modes`.
    convenience init(
        accepted descriptor: Int32, local: SocketAddress, remote: SocketAddress, loop: Loop, modes: [Loop.Mode]
    ) {
        self.init(descriptor: descriptor, local: local, remote: remote, loop: loop, modes: modes, connecting: false)
    }

    /// A child process's standard stream: the parent's end of a connected socket pair, which
    /// joins a loop when its process does (``join(_:inModes:)``).
    convenience init(childStream descriptor: Int32) {
        let local = Platform.address(of: descriptor) ?? SocketAddress.unnamedUnix
        let remote = Platform.address(of: descriptor, peer: true) ?? local
        self.init(descriptor: descriptor, local: local, remote: remote, loop: nil, connecting: false)
    }

    deinit {
        // In no loop and referenced by nobody: nothing can be delivered any more.
        descriptorSource.invalidate()
        boundLoop.load(ordering: .acquiring)?.release()
    }

    /// Debug builds: traps unless called on the loop's thread, the only one that touches the state
    /// below "Loop thread only" (every path to it passes one of these checks: the descriptor's
    /// events, the lifecycle's changes, reads, writes, flushes and deliveries).
    @inline(__always)
    func assertOnLoopThread() {
        assert(
            boundLoop.load(ordering: .relaxed)?._withUnsafeGuaranteedRef { $0.isCurrentThread } ?? false,
            "RunLoopKit: a LoopConnection's loop-thread state touched off its loop's thread")
    }

    /// The output queue, watermarks and waiting writers: loop thread only (checked in debug builds).
    var output: ConnectionOutput {
        _read {
            assertOnLoopThread()
            yield outputState
        }
        _modify {
            assertOnLoopThread()
            yield &outputState
        }
    }

    @inline(__always)
    func withShared<R>(_ body: (inout Shared) -> R) -> R {
        sharedLock.withLock { body(&shared) }
    }

    func withResidency<R>(_ body: (inout Residency) -> R) -> R {
        withShared { body(&$0.residency) }
    }

    func descriptorReady(_ events: LoopDescriptorSource.Events) { handle(events) }

    func descriptorSourceInvalidated() { sourceWasInvalidated() }

    /// The connection's loop. Only once it has one: on its thread, or after `readyLoop` said so.
    var loop: Loop { boundLoop.load(ordering: .acquiring)!.takeUnretainedValue() }

    /// Whether the calling thread is the connection's loop's thread, and calls may go to the loop
    /// directly (not for a child's stream whose process is in no loop yet, or whose early calls
    /// are being handed over). Takes no reference to the loop: retaining and releasing a loop,
    /// which weak references give a side table, went the runtime's slow way on every write
    /// (docs/performance-notes.md#instructions-per-request).
    var isOnLoopThread: Bool {
        if let early, !early.withLock({ $0.handedOver }) { return false }
        guard let loop = boundLoop.load(ordering: .acquiring) else { return false }
        return loop._withUnsafeGuaranteedRef { $0.isCurrentThread }
    }

    /// Runs `body` on the loop's thread: now if this is it, else posted in the connection's modes
    /// (which keeps each calling thread's order). Before a child's stream has a loop, `body` waits
    /// for the one it joins.
    func onLoop(_ body: @escaping @Sendable (LoopConnection) -> Void) {
        let loop: Loop
        if let early {
            guard
                let ready = early.withLock({ calls -> Loop? in
                    guard calls.handedOver else {
                        calls.calls.append(body)
                        return nil
                    }
                    return self.loop
                })
            else { return }
            loop = ready
        } else {
            loop = self.loop
        }
        if loop.isCurrentThread {
            body(self)
        } else {
            loop.perform(inModes: postingModes) { body(self) }
        }
    }

    /// A child's stream joins `loop`: the calls made so far are posted there in `modes`, in their
    /// order, before any later one. Once; a later call does nothing (a second loop is refused when
    /// the connection is added to it).
    func join(_ loop: Loop, inModes modes: [Loop.Mode]) {
        guard let early else { return }
        early.withLock { calls in
            guard !calls.handedOver else { return }
            // Stored first: the posted calls may run on the loop's thread before this returns.
            boundLoop.store(Unmanaged.passRetained(loop), ordering: .releasing)
            // Later calls are posted in the same modes as these, before the add records them.
            withResidency { residency in
                if residency.modes.isEmpty { residency.modes = modes }
            }
            for call in calls.calls { loop.perform(inModes: modes) { call(self) } }
            calls.calls = []
            calls.handedOver = true
        }
    }
}
