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
    // @unchecked: `core` and `output` are touched on the loop's thread only, `settings` under
    // `settingsLock`; the rest is immutable or atomic.

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
    /// What few connections have (`LoopConnection+Thread.swift`).
    let extrasSlot = OnceReference<Extras>()
    /// Set once, in `init`, before the item is shared.
    private var sourceSlot: LoopDescriptorSource! = nil
    var descriptorSource: LoopDescriptorSource { sourceSlot }

    // The connection's three parts: its settings, which any thread reads and changes under
    // `settingsLock`; its core, the loop thread's state; and its output queue. Beside them, what
    // the loop thread publishes for other threads (`openState`, `queuedCount`,
    // `belowHighWatermark`), as atomics of their own.

    /// Residency and settings (`ConnectionSettings.swift`), under `settingsLock`.
    @exclusivity(unchecked) private var settings: ConnectionSettings
    /// The lock word, which holds the switches too. Next to the atomic flags after it: one word
    /// for all (the stored layout is in declaration order, and a server holds many idle
    /// connections).
    private let settingsLock = SettingsWord()
    /// `isOpen`: set when the connection is connected, cleared as it closes.
    let openState: Atomic<Bool>
    /// Whether the output is below the high watermark (`isWritable`): false from when it reaches
    /// the high watermark until it falls to the low one. Written by the loop's thread, read by any.
    let belowHighWatermark = Atomic<Bool>(true)
    let fileDescriptor: Int32
    /// The bytes queued, as the output last recorded them (`outputBufferedBytes`): written by the
    /// loop's thread, read by any.
    let queuedCount = Atomic<Int>(0)

    // Touched only on the loop's thread, so the runtime's exclusivity checks (a thread-local
    // access set, entered and left on every access) are redundant: `@exclusivity(unchecked)`.
    // They were a large share of a request's instructions, most of them in this class
    // (docs/performance-notes.md#instructions-per-request).

    /// The loop thread's state (`ConnectionCore.swift`).
    @exclusivity(unchecked) var core: ConnectionCore
    /// The input buffer, beside the core rather than in it: it is lent to `onRead` (inout) while
    /// the handler calls back into the connection, which reaches the core. Nothing is allocated
    /// for it until bytes arrive.
    @exclusivity(unchecked) var input = LoopBuffer()
    /// The output queue and the writers waiting below the high watermark; reached through
    /// `output` (loop thread).
    @exclusivity(unchecked) private var outputState = ConnectionOutput()

    /// The default `writeWatermarks`: 64 KiB and 256 KiB.
    public static let defaultWriteWatermarks = (low: 64 * 1024, high: 256 * 1024)

    /// The default `inputLimit`: 1 MiB.
    public static let defaultInputLimit = 1 << 20

    init(
        descriptor: Int32, local: SocketAddress, remote: SocketAddress, loop: Loop?, modes: [Loop.Mode] = [],
        connecting: Bool
    ) {
        fileDescriptor = descriptor
        localAddress = local
        remoteAddress = remote
        boundLoop = Atomic(loop.map { Unmanaged.passRetained($0) })
        if loop == nil { _ = extrasSlot.storeIfNil(Extras(early: Locked(EarlyCalls()))) }
        let watched: LoopDescriptorSource.Events = connecting ? .writable : .readable
        core = ConnectionCore(
            lifecycle: connecting ? .connecting(then: .none) : .open(input: .open, output: .open), watched: watched)
        openState = Atomic(!connecting)
        settings = ConnectionSettings(residency: Residency(loop: loop, modes: modes))
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

    /// Debug builds: traps unless called on the loop's thread, the only one that touches `core`
    /// and `output` (every path to them passes one of these checks: the descriptor's events, the
    /// lifecycle's changes, reads, writes, flushes and deliveries).
    @inline(__always)
    func assertOnLoopThread() {
        assert(
            boundLoop.load(ordering: .relaxed)?._withUnsafeGuaranteedRef { $0.isCurrentThread } ?? false,
            "RunLoopKit: a LoopConnection's loop-thread state touched off its loop's thread")
    }

    /// The output queue and its waiting writers: loop thread only (checked in debug builds).
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

    /// Runs `body` on the settings under their lock word. Any thread; `body` must not call back
    /// into the connection.
    @inline(__always)
    func withSettings<R>(_ body: (inout ConnectionSettings) -> R) -> R {
        settingsLock.withLock { _ in body(&settings) }
    }

    /// The switches (`isReadingPaused`, `allowsHalfClosure`, `pausesReadingWhileUnwritable`),
    /// read without the lock. Any thread.
    @inline(__always)
    var switches: SettingsWord.Switches { settingsLock.switches }

    /// Turns `switch` on or off, under the lock. Any thread.
    func set(_ setting: SettingsWord.Switches, _ on: Bool) {
        settingsLock.withLock { switches in
            if on { switches.insert(setting) } else { switches.remove(setting) }
        }
    }

    func withResidency<R>(_ body: (inout Residency) -> R) -> R {
        withSettings { body(&$0.residency) }
    }

    /// Whether the connection holds any of the state made on first use (the core's rare state,
    /// `extrasSlot`, the rare settings): none while it is idle with its defaults. Loop thread only.
    var holdsOptionalState: Bool {
        assertOnLoopThread()
        return core.holdsRare || extrasSlot.load() != nil || withSettings { $0.hasRareSettings }
    }

    func descriptorReady(_ events: LoopDescriptorSource.Events) { handle(events) }

    func descriptorSourceInvalidated() { sourceWasInvalidated() }

    /// The connection's loop. Only once it has one: on its thread, or after `readyLoop` said so.
    var loop: Loop { boundLoop.load(ordering: .acquiring)!.takeUnretainedValue() }
}
