import Glibc
import Synchronization

/// A run loop: a per-thread event loop with modes, timers, observers, custom sources and
/// cross-thread blocks, with CFRunLoop's semantics, sleeping in the kernel (libevent) when idle.
///
/// Each thread has at most one loop, created on first access to ``current``. Only the loop's own
/// thread may run it; any thread may `perform`, `wakeUp`, `stop`, and add or remove items.
/// A thread's loop is torn down (descriptors closed, items released) when the thread exits.
public final class Loop: @unchecked Sendable {
    // MARK: Thread-safe state

    /// Mode tables, the common set, and the run stack, shared with other threads. Behind a lock
    /// word rather than a `Locked`: adding a timer and invalidating it take this lock once each,
    /// and a pthread mutex's lock and unlock calls would add two atomic operations to each timer
    /// (docs/performance-notes.md#instructions-per-timer).
    let state: WordLocked<ModeTable>
    /// The mode tables' change counter (`state.version`), read without taking the lock.
    let tablesVersion: TableVersion
    /// Blocks posted from any thread and the loop's coalesced wake-up (see `Core/Inbox.swift`).
    let inbox: Inbox
    /// Set by `LoopSource.signal()` so the loop scans its sources only when one was signalled.
    let sourceSignalled = Atomic<Bool>(false)
    /// The same for ports' sources, served in another step.
    let portSignalled = Atomic<Bool>(false)
    /// `spinLimit` in nanoseconds.
    let spinLimitNanoseconds = Atomic<Int64>(Loop.defaultSpinLimitNanoseconds)
    /// Bumped by every removal of an item: lets a batch of ready descriptors skip re-checking
    /// membership when nothing was removed meanwhile.
    let removals = Atomic<UInt64>(0)
    /// Instruments attached from any thread; the loop thread copies them into `instruments`.
    let instrumentRegistry = Locked<[any LoopInstrument]>([])
    let instrumentsChanged = Atomic<Bool>(false)
    /// Whether any instrument is attached: posted work is then stamped with its posting time.
    let instrumentsAttached = Atomic<Bool>(false)
    /// The recorder behind `metrics`, while `collectsMetrics` is on.
    let metricsRecorder = Locked<MetricsRecorder?>(nil)
    /// True for `Loop.main`, bound to the process's main thread.
    let isMainLoop: Bool
    /// This loop's number among the loops of the process, never reused (an address may be).
    let serial = Loop.serials.add(1, ordering: .relaxed).newValue
    private static let serials = Atomic<UInt64>(0)
    /// Set by `end()`: mirrors `Inbox.closed` and `State.ended` for readers that take no lock.
    let endedFlag = Atomic<Bool>(false)
    /// Jobs enqueued after the loop ended, run by the enqueuing threads (see `Loop+Executor.swift`).
    let afterlife = Locked(AfterlifeQueue())
    /// Blocks scheduled for later, and the atomics mirroring the queue's top so that a pass takes
    /// no lock unless one is due (see `Loop+Schedule.swift`). Behind a lock word: each
    /// `schedule(after:)` and `cancel()` takes it once for a few heap operations, where a pthread
    /// mutex would cost more than they do (docs/performance-notes.md#instructions-per-scheduled-block).
    let scheduledQueue = WordLocked(ScheduledQueue())
    let scheduledWake = Atomic<Ticks>(.max)
    let scheduledDue = Atomic<Ticks>(.max)
    let scheduledPending = Atomic<Int>(0)
    /// What timers, observers and custom sources bound to this loop hold (see `LoopLink`).
    let link: LoopLink
    /// The inotify descriptor of its file watches, opened at the first one (`FileWatchHub.swift`).
    let fileWatches = Locked<FileWatchHub?>(nil)

    // MARK: Loop-thread-only state

    /// What only the loop's thread touches, never across a callout (the iteration moves what it
    /// works on into locals first). Stored without the runtime's dynamic exclusivity checks (a
    /// lookup on every access of a class's stored property); debug builds check the thread rule
    /// instead, at the one accessor, `onThread`.
    @exclusivity(unchecked) private var threadState: LoopThreadState

    /// The loop-thread-only state. Loop thread only (checked in debug builds).
    var onThread: LoopThreadState {
        _read {
            assertLoopThread()
            yield threadState
        }
        _modify {
            assertLoopThread()
            yield &threadState
        }
    }

    /// Created on the loop thread at the first run: every libevent call stays on this thread.
    var backend: LibeventBackend? {
        get { onThread.backend }
        set { onThread.backend = newValue }
    }

    /// The attached instruments, nil when none (refreshed from `instrumentRegistry`). Loop thread.
    var instruments: [any LoopInstrument]? {
        get { onThread.instruments }
        set { onThread.instruments = newValue }
    }

    private init(isMainLoop: Bool, wakeDescriptor: Int32) {
        self.isMainLoop = isMainLoop
        let version = TableVersion()
        self.tablesVersion = version
        self.state = WordLocked(ModeTable(version: version))
        self.inbox = Inbox(descriptor: wakeDescriptor)
        let link = LoopLink()
        self.link = link
        self.threadState = LoopThreadState(link: link)
        link.attach(self)
    }

    /// The wake-up eventfd of a loop made on first access (`current`, `main`), which has no way to
    /// report a failure: it stops the process.
    private static func openWakeDescriptorOrStop() -> Int32 {
        do {
            return try Platform.openEventDescriptor()
        } catch {
            cannotCreate(error)
        }
    }

    /// Stops the process for a loop that could not be created, saying why in plain words and what
    /// reports it instead.
    static func cannotCreate(_ error: LoopError) -> Never {
        preconditionFailure(
            "RunLoopKit: cannot create a loop: \(error.plainReason). `try LoopThread.start(name:)` and "
                + "`try LoopGroup.start(threads:name:)` report this as a LoopError instead of stopping the process")
    }

    // MARK: Per-thread loops

    /// The calling thread's loop, created on first access.
    ///
    /// Any thread. On the main thread this is ``main``.
    public static var current: Loop {
        if let raw = Platform.currentLoopPointer {
            return Unmanaged<Loop>.fromOpaque(raw).takeUnretainedValue()
        }
        let loop =
            Platform.isMainThread ? Loop.main : Loop(isMainLoop: false, wakeDescriptor: openWakeDescriptorOrStop())
        install(loop)
        return loop
    }

    /// Makes `loop` the calling thread's. The key releases it at thread exit, tearing it down;
    /// the thread-local copy is for reading.
    private static func install(_ loop: Loop) {
        let raw = Unmanaged.passRetained(loop).toOpaque()
        if case .failure(let failure) = Platform.setThreadValue(raw, for: ThreadSlot.key) {
            preconditionFailure("RunLoopKit: pthread_setspecific failed: \(failure)")
        }
        Platform.currentLoopPointer = raw
    }

    /// Creates the calling thread's loop with every descriptor it needs (its wake-up eventfd, and
    /// the event backend's epoll, signal pipe and timerfd) now, instead of stopping the process
    /// later when one cannot be opened. A new thread with no loop yet, not the main thread. Throws a `LoopError`
    /// with `systemError` set; a loop that got its eventfd but no backend stays the thread's and
    /// goes when the thread exits, closing the eventfd, like any thread's loop.
    static func startCurrent() throws(LoopError) -> Loop {
        precondition(
            Platform.currentLoopPointer == nil && !Platform.isMainThread,
            "RunLoopKit: Loop.startCurrent() is for a new thread that has no loop yet")
        let loop = Loop(isMainLoop: false, wakeDescriptor: try Platform.openEventDescriptor())
        install(loop)
        _ = try loop.startBackend()
        return loop
    }

    /// The main thread's loop.
    ///
    /// Any thread may reference it; only the main thread may run it. Stopping the main loop is
    /// allowed but discouraged: it is meant to run for the whole life of the process.
    public static let main = Loop(isMainLoop: true, wakeDescriptor: openWakeDescriptorOrStop())

    /// Whether the calling thread is this loop's thread, without creating a loop for it.
    var isCurrentThread: Bool {
        if let raw = Platform.currentLoopPointer {
            return raw == Unmanaged.passUnretained(self).toOpaque()
        }
        return isMainLoop && Platform.isMainThread
    }

    /// Debug builds: traps unless called on the loop's thread (or during its teardown there).
    @inline(__always)
    func assertLoopThread() {
        assert(isCurrentThread, "RunLoopKit: Loop's thread state touched off its loop's thread")
    }

    func preconditionLoopThread(_ what: @autoclosure () -> String) {
        precondition(
            Loop.current === self,
            "RunLoopKit: \(what()) must be called on the loop's own thread; a loop is driven only by the thread it belongs to"
        )
    }

    // MARK: Observing the loop

    /// The mode of the innermost running `run`, or nil when the loop is not running.
    ///
    /// Any thread.
    public var currentMode: Mode? {
        state.withLock { $0.runStack.last?.mode }
    }

    /// Whether the loop's thread is asleep in the kernel waiting for an event.
    ///
    /// Any thread; the answer may be stale by the time it is read.
    public var isWaiting: Bool { inbox.isAsleep }

    /// The modes that `.common` stands for; starts as `[.default, .tracking]`.
    ///
    /// Any thread.
    public var commonModes: Set<Mode> {
        state.withLock { $0.commonModes }
    }

    /// Adds `mode` to the common set: every item added to `.common`, now or later, is in `mode` too.
    ///
    /// Any thread. Adding `.common` itself is a programmer error.
    public func addCommonMode(_ mode: Mode) {
        precondition(mode != .common, "RunLoopKit: .common is the common set itself, not a mode to add to it")
        state.withLock { $0.addCommonMode(mode) }
        wakeUpIfForeign()
    }

    // MARK: The end

    /// Whether the loop has ended: its thread exited, or its `LoopThread` or `LoopGroup` was
    /// stopped. An ended loop refuses work: `perform` returns false, `submit` throws, adding an
    /// item does nothing (the item stays usable on another loop).
    ///
    /// Any thread. Once true it stays true.
    public var hasEnded: Bool { endedFlag.load(ordering: .acquiring) }

    /// Ends the loop for good: from here on blocks are refused, items are not added and
    /// instruments not attached. Blocks already queued stay queued for a last pass or the
    /// teardown. Loop thread; idempotent.
    func end() {
        // The flag first: `attach` reads it under the registry's lock, after which it is emptied.
        endedFlag.store(true, ordering: .releasing)
        inbox.close()
        state.withLock { $0.ended = true }
        instrumentRegistry.withLock { $0.removeAll() }
    }

    /// Ends the loop, releases its items and closes its descriptors; runs on the loop's thread as
    /// it exits. Blocks that never ran are released unrun; Swift concurrency jobs that never ran
    /// run now, on this thread, so that no task waits forever on a loop that is gone.
    func tearDown() {
        end()
        closeScheduledQueue()
        // Released outside the lock: a closure's deinit may post to this loop (and be refused).
        let orphans = inbox.takeOrphans()
        orphans.append(movingFrom: onThread.pendingBlocks)
        onThread.pendingBlocks.releaseStorage()
        onThread.runnableSpare = nil
        runOrphanedJobs(orphans)
        let (items, old, released) = state.withLock { state in
            let items = state.allItems()
            let released = items.compactMap { item in
                item.membership.leaveEveryMode()
                return item.updateKeeper()
            }
            let old = state
            state = ModeTable(version: state.version)
            state.ended = true
            state.version.bump()
            return (items, old, released)
        }
        for item in items { item.loopDidTearDown() }
        closeFileWatches()
        withExtendedLifetime((old, released)) {}
        backend = nil
        // The eventfd is closed when the inbox goes, with the Loop object: another thread holding
        // the loop may be writing it right now, and a closed descriptor number could be reused.
    }
}

/// The thread-specific slot holding each thread's loop; its destructor tears the loop down.
enum ThreadSlot {
    static let key: Platform.ThreadKey = {
        let made = Platform.makeThreadKey { raw in
            guard let raw else { return }
            let loop = Unmanaged<Loop>.fromOpaque(raw).takeRetainedValue()
            // glibc has cleared the slot; tearDown must still see this thread as the loop's.
            Platform.setThreadValue(raw, for: ThreadSlot.key)
            Platform.currentLoopPointer = raw
            loop.tearDown()
            Platform.setThreadValue(nil, for: ThreadSlot.key)
            Platform.currentLoopPointer = nil
        }
        switch made {
        case .success(let key): return key
        case .failure(let failure): preconditionFailure("RunLoopKit: pthread_key_create failed: \(failure)")
        }
    }()
}

extension Loop {
    /// A run-loop mode: a named set of sources, timers and observers.
    ///
    /// `.common` is not a mode but names the common set (see ``Loop/commonModes``).
    public struct Mode: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
        /// The mode's name.
        public let name: String
        /// FNV-1a of the name, computed once: mode tables are looked up on every iteration.
        private let nameHash: UInt64

        /// A mode with the given name; modes with equal names are the same mode.
        public init(_ name: String) {
            self.name = name
            self.nameHash = name.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
        }

        /// A mode from a string literal, e.g. `let mode: Loop.Mode = "import"`.
        public init(stringLiteral value: String) { self.init(value) }

        /// Whether two modes have the same name.
        public static func == (lhs: Mode, rhs: Mode) -> Bool {
            lhs.nameHash == rhs.nameHash && lhs.name == rhs.name
        }

        /// Hashes the mode's name (computed once, when the mode is made).
        public func hash(into hasher: inout Hasher) {
            hasher.combine(nameHash)
        }

        // The three named modes are made from their names and hashes as literals, not kept in
        // lazily initialised globals: every access to one of those is a call (`swift_once`), which
        // `loop.add(timer, forMode: .default)` would pay on every timer, the loop's own uses
        // included (docs/performance-notes.md#instructions-per-timer).

        /// The mode a loop runs in by default.
        public static var `default`: Mode { Mode(name: "default", nameHash: 0xebad_a516_8620_c5fe) }
        /// The mode of interactive tracking (iOS's `UITrackingRunLoopMode`, while a scroll view is dragged).
        public static var tracking: Mode { Mode(name: "tracking", nameHash: 0xa6bf_719a_4602_b0bc) }
        /// The pseudo-mode naming the common set, which starts as `[.default, .tracking]`.
        public static var common: Mode { Mode(name: "common", nameHash: Mode.commonNameHash) }

        /// A mode whose name's hash is known: `nameHash` must be what `init(_:)` computes.
        private init(name: String, nameHash: UInt64) {
            self.name = name
            self.nameHash = nameHash
        }

        /// The mode's name.
        public var description: String { name }

        /// Whether this is `.common`, without reaching `Mode.common`: a lazily initialised global,
        /// whose access check was a call on every timer added or removed.
        var isCommonSet: Bool { nameHash == Mode.commonNameHash && name == "common" }

        /// FNV-1a of "common", as `init` computes it (a literal, so no lazy initialisation).
        private static let commonNameHash: UInt64 = 0x7dbb_8c7c_a3ae_b214
    }

    /// The phases of a loop that an observer can watch.
    public struct Activity: OptionSet, Sendable, Hashable, CustomStringConvertible {
        /// The activities as bits, with CFRunLoop's values (`entry` 1, `beforeTimers` 2, …, `exit` 128).
        public let rawValue: UInt32
        /// The activities whose bits are set in `rawValue`.
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        /// A run is entered.
        public static let entry = Activity(rawValue: 1 << 0)
        /// The loop is about to fire due timers.
        public static let beforeTimers = Activity(rawValue: 1 << 1)
        /// The loop is about to perform signalled sources.
        public static let beforeSources = Activity(rawValue: 1 << 2)
        /// The loop is about to sleep in the kernel.
        public static let beforeWaiting = Activity(rawValue: 1 << 5)
        /// The loop has woken up.
        public static let afterWaiting = Activity(rawValue: 1 << 6)
        /// A run is exited.
        public static let exit = Activity(rawValue: 1 << 7)
        /// Every activity.
        public static let allActivities: Activity = [
            .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
        ]

        /// The activity's name (`entry`, `beforeWaiting`, …), or a bracketed list for several.
        public var description: String {
            let names: [(Activity, String)] = [
                (.entry, "entry"), (.beforeTimers, "beforeTimers"), (.beforeSources, "beforeSources"),
                (.beforeWaiting, "beforeWaiting"), (.afterWaiting, "afterWaiting"), (.exit, "exit"),
            ]
            let parts = names.filter { contains($0.0) }.map(\.1)
            return parts.count == 1 ? parts[0] : "[\(parts.joined(separator: ", "))]"
        }
    }

    /// Why a run returned.
    public enum RunResult: Sendable, Equatable {
        /// The mode had (or came to have) no sources, timers or pending blocks, or was `.common`.
        /// (On the main thread, once the main dispatch queue has had work, it keeps the common
        /// modes of `Loop.main` from finishing.)
        case finished
        /// `stop()` was called.
        case stopped
        /// The run's timeout passed.
        case timedOut
        /// A source was handled and the run was asked to return after one.
        case handledSource
    }
}
