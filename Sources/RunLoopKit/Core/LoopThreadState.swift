/// The state of a loop that only its own thread touches (see `Loop.onThread`).
struct LoopThreadState {
    /// Created on the loop thread at the first run: every libevent call stays on this thread.
    var backend: LibeventBackend?
    /// Blocks moved out of the inbox that wait for a mode that is not running.
    let pendingBlocks: BlockBuffer
    /// An empty block buffer for `runBlocks` to move a batch into and run it from; nil while a
    /// batch runs (a nested run then makes its own).
    var runnableSpare: BlockBuffer?
    /// The attached instruments, nil when none (refreshed from `Loop.instrumentRegistry`).
    var instruments: [any LoopInstrument]?
    /// The tables' version when the descriptor change queue was last emptied.
    var descriptorChangesSeen: UInt64 = 0
    /// Reused by each pass over signalled sources, so that it allocates nothing.
    var signalledScratch: [(source: LoopSource, since: UInt64)] = []
    /// What the iteration last read about its mode (see `Loop.view(of:)`).
    var modeView: ModeView? {
        didSet { modeViewReference = modeView.map { Unmanaged.passUnretained($0) } }
    }
    /// `modeView` without a reference count of its own, for reads that take none (see
    /// `Loop.withView(of:_:)`); `modeView` keeps it alive.
    private(set) var modeViewReference: Unmanaged<ModeView>?
    /// Spinning before sleeping (see `Loop+Spin.swift`).
    var spin = SpinHistory()
    /// Main loop: libdispatch signalled main-queue work not yet drained (e.g. during a custom mode).
    var mainQueuePending = false
    /// Main loop: the main queue has had work (a block or a `@MainActor` job) at least once, so it
    /// keeps the common modes from being finished from then on (see `Loop.isFinished`).
    var mainQueueInUse = false
    /// Main loop: inside `_dispatch_main_queue_callback_4CF`, which must not be re-entered.
    var drainingMainQueue = false
    /// The running pass's number and the hooks other parts of the library add to each pass (see
    /// `Loop+Hooks.swift`).
    var hooks = LoopHooks()
    /// The loop-thread state of another part of the library (the sockets': their read scratch
    /// and gathered writes), made when that part first needs it and kept for the loop's life. The
    /// iteration never reads it; its owner casts it back. One slot: one part has such state.
    var extensionState: AnyObject?

    /// The state of the loop `link` is for: its block buffers belong to that loop's thread.
    init(link: LoopLink) {
        pendingBlocks = BlockBuffer(owner: link)
        runnableSpare = BlockBuffer(owner: link)
    }
}

/// What the loop remembers of its recent waits, to decide whether to spin before the next one.
struct SpinHistory {
    /// A running average of how long recent waits lasted, in ticks; negative before the first
    /// wait, which spins.
    var averageWait: Ticks = -1
    /// Waits left before the loop spins again after a failed spin, and the length of the last
    /// such pause.
    var backoff = 0
    var backoffLength = 0
    /// How many spins the loop has started (for tests and diagnostics).
    var started = 0
}
