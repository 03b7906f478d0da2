internal import CLibevent
import Glibc
import Synchronization

// The loop's event base: with LibeventBuffer.swift (the connections' evbuffers), the only code that
// talks to libevent. All of it runs on the loop's own thread.
//
// Callbacks only record what fired and return: user callouts run in Swift after
// `event_base_loop` has returned, so a callout may run the loop again (nested runs) without
// re-entering libevent, which refuses re-entrant `event_base_loop` calls.
//
// Timing does not use libevent's timer heap: its cached time comes from CLOCK_MONOTONIC_COARSE
// (4 ms steps here) and EVENT_BASE_FLAG_PRECISE_TIMER costs a timerfd_settime on every dispatch.
// Instead one timerfd per loop is armed at the loop's next wake-up time and re-armed only when that
// time changes, so a steady loop makes no timer system calls and wakes with nanosecond resolution.

/// Used by the loop's thread only (every entry point checks it in debug builds): its stored
/// properties skip the runtime's exclusivity checks.
final class LibeventBackend: EventBackend {
    private let base: OpaquePointer
    private var wakeEvent: OpaquePointer?
    private var timerEvent: OpaquePointer?
    private var mainQueueEvent: OpaquePointer?
    private let wakeDescriptor: Int32
    private let timerDescriptor: Int32
    /// The time (ticks) the timerfd is armed for, or nil when disarmed.
    @exclusivity(unchecked) private var armed: Ticks?
    /// Filled in by callbacks during one `poll`.
    @exclusivity(unchecked) private var events = BackendEvents()
    /// The descriptor sources registered with the base, retained; each knows its place here
    /// (`LibeventRegistration.index`), so no table maps sources to events: an idle connection's
    /// registration is its source's fields and one array slot.
    @exclusivity(unchecked) private var registered: [LoopDescriptorSource] = []
    /// Behind `registeredMode`.
    @exclusivity(unchecked) private var uncheckedRegisteredMode: Loop.Mode?
    /// Descriptor sources currently added to the base (their events pending in epoll).
    @exclusivity(unchecked) private var watchedCount = 0

    /// The mode whose descriptor sources are all registered (others may be, until they fire).
    var registeredMode: Loop.Mode? {
        get {
            assertLoopThread()
            return uncheckedRegisteredMode
        }
        set {
            assertLoopThread()
            uncheckedRegisteredMode = newValue
        }
    }

    /// Whether a non-blocking poll could find anything the loop does not already know about: a
    /// descriptor source or the main queue is watched. Wake-ups and timer expiries need no poll:
    /// the loop checks its inbox and its timers' fire dates in memory before it sleeps.
    var hasPollableEvents: Bool {
        assertLoopThread()
        return watchedCount > 0 || mainQueueEvent != nil || embeddingDescriptor != nil
    }

    /// libevent's epoll descriptor, once another loop polls it (`Loop.backendDescriptor`): from
    /// then on every pass polls, so that the wake-up eventfd and the timerfd are read and the
    /// descriptor is not left readable for work already done.
    private var embeddingDescriptor: Int32?

    /// libevent's epoll descriptor: the one of this process that has the loop's wake-up eventfd
    /// registered. libevent has no call that returns it; its epoll backend registers the eventfd
    /// at once (`event_add` above), so the descriptor is found by what it watches. nil if libevent
    /// runs another method (`EVENT_NOEPOLL` set in the environment).
    func epollDescriptor() -> Int32? {
        assertLoopThread()
        if let embeddingDescriptor { return embeddingDescriptor }
        guard String(cString: event_base_get_method(base)) == "epoll" else { return nil }
        embeddingDescriptor = Platform.epollDescriptor(watching: wakeDescriptor)
        return embeddingDescriptor
    }

    /// Whether another loop polls the backend's descriptor.
    var isEmbedded: Bool { embeddingDescriptor != nil }

    /// The loop's thread, which alone may use the backend (checked in debug builds).
    private let thread = Platform.currentThread

    @inline(__always)
    private func assertLoopThread() {
        assert(Platform.isCurrentThread(thread), "RunLoopKit: LibeventBackend used off its loop's thread")
    }

    /// `event_base_new_with_config` with no locking (only the loop's thread uses the base), plus the
    /// persistent read events of the wake-up eventfd (owned by the loop) and of a new timerfd.
    init(wakeDescriptor: Int32) throws(LoopError) {
        self.wakeDescriptor = wakeDescriptor
        LibeventBackend.quietLogs
        guard let config = event_config_new() else { throw LoopError.backend("event_config_new failed") }
        defer { event_config_free(config) }
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        let base = try LibeventBackend.check(
            Platform.libevent { event_base_new_with_config(config) }, "event_base_new_with_config")
        self.base = base
        do {
            self.timerDescriptor = try Platform.makeTimerDescriptor()
        } catch {
            event_base_free(base)
            throw error
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let persistentRead = Int32(EV_READ | EV_PERSIST)
        // Once stored, the events are freed by `deinit`, which runs when this throws.
        let wakeEvent = try LibeventBackend.check(
            Platform.libevent { rlk_event_new(base, wakeDescriptor, persistentRead, LibeventBackend.onWake, context) },
            "event_new(wake-up eventfd)")
        self.wakeEvent = wakeEvent
        try LibeventBackend.check(Platform.libevent { event_add(wakeEvent, nil) }, "event_add(wake-up eventfd)")
        let timerDescriptor = self.timerDescriptor
        let timerEvent = try LibeventBackend.check(
            Platform.libevent {
                rlk_event_new(base, timerDescriptor, persistentRead, LibeventBackend.onTimer, context)
            },
            "event_new(timerfd)")
        self.timerEvent = timerEvent
        try LibeventBackend.check(Platform.libevent { event_add(timerEvent, nil) }, "event_add(timerfd)")
    }

    deinit {
        for source in registered {
            forgetEvent(of: source)
            source.registration = LibeventRegistration()
            source.closeOwnedDescriptor()
        }
        if let mainQueueEvent { event_free(mainQueueEvent) }
        if let wakeEvent { event_free(wakeEvent) }
        if let timerEvent { event_free(timerEvent) }
        event_base_free(base)
        Platform.closeDescriptor(timerDescriptor)
    }

    /// The value of a libevent call made while the backend is set up, or a `LoopError` with the
    /// errno its failure left.
    @discardableResult
    private static func check<Value>(_ result: Result<Value, LibeventFailure>, _ call: String) throws(LoopError)
        -> Value
    {
        switch result {
        case .success(let value): return value
        case .failure(let failure):
            throw LoopError.backend("\(call) failed (\(failure))", systemError: failure.systemError?.code)
        }
    }

    // MARK: Dispatch

    /// Dispatches ready events without blocking: `event_base_loop(EVLOOP_NONBLOCK | EVLOOP_ONCE)`.
    /// NONBLOCK alone keeps looping while events are active, and a level-triggered descriptor
    /// that callbacks only record (never read) stays active: ONCE makes it return after one pass.
    func pollNow() -> BackendEvents {
        dispatch(Int32(EVLOOP_NONBLOCK | EVLOOP_ONCE))
    }

    /// Blocks until an event is ready or `deadline` (nil: no deadline) passes:
    /// `event_base_loop(EVLOOP_ONCE)` with the timerfd armed for `deadline`.
    func wait(until deadline: Ticks?) -> BackendEvents {
        arm(deadline)
        return dispatch(Int32(EVLOOP_ONCE))
    }

    private func dispatch(_ flags: Int32) -> BackendEvents {
        assertLoopThread()
        // Reset in place: the ready array keeps its capacity from one dispatch to the next (the
        // loop's copy of the previous one, if a nested run is iterating it, is left intact).
        events.woken = false
        events.mainQueueReady = false
        events.callbacks = 0
        events.ready.removeAll(keepingCapacity: true)
        // A failure means libevent failed internally (the base is never re-entered: callbacks only record).
        if case .failure(let failure) = Platform.libevent({ event_base_loop(base, flags) }) {
            preconditionFailure("RunLoopKit: event_base_loop failed (\(failure))")
        }
        return events
    }

    /// `timerfd_settime` (relative, CLOCK_BOOTTIME like ContinuousClock), only when the wanted
    /// instant differs from the armed one; nil disarms it so that no stale wake-up happens.
    private func arm(_ deadline: Ticks?) {
        assertLoopThread()
        guard deadline != armed else { return }
        Platform.armTimerDescriptor(timerDescriptor, in: deadline.map { $0 - TickClock.now })
        armed = deadline
    }

    // MARK: Descriptor sources

    private static let quietLogs: Void = rlk_quiet_libevent_logs()

    /// Watches `source` for `events` (`event_new` + `event_add`, or `event_del` + `event_assign` +
    /// `event_add` when they change); nil or empty stops watching (`event_del`). A source no longer
    /// valid is dropped (`event_free`). If libevent refuses the descriptor, the source fails with
    /// a `LoopError` naming it.
    func watch(_ source: LoopDescriptorSource, _ events: LoopDescriptorSource.Events?) {
        assertLoopThread()
        var flags: Int32 = 0
        if let events {
            if events.contains(.readable) { flags |= Int32(EV_READ) }
            if events.contains(.writable) { flags |= Int32(EV_WRITE) }
            if events.contains(.hangUp) && !events.contains(.readable) {
                // Not reading, yet told of the peer's end of stream (EV_CLOSED: EPOLLRDHUP) and of
                // a reset, which libevent reports as EV_READ only (EPOLLERR and EPOLLHUP): so
                // EV_READ too, edge-triggered, as unread input would keep a level-triggered read
                // ready for ever.
                flags |= Int32(EV_READ | EV_CLOSED | EV_ET)
            }
        }
        guard flags != 0 else {
            if source.registration.backend != nil {
                if source.registration.flags != 0 {
                    event_del(source.registration.event)
                    source.registration.flags = 0
                    watchedCount -= 1
                }
                if events == nil { release(source) }
            } else if events == nil {
                source.closeOwnedDescriptor()
            }
            return
        }
        if source.registration.backend != nil {
            guard source.registration.flags != Int16(flags) else { return }
            if source.registration.flags != 0 {
                event_del(source.registration.event)
                source.registration.flags = 0
                watchedCount -= 1
            }
        } else {
            source.registration = LibeventRegistration(backend: self, index: Int32(registered.count))
            registered.append(source)
        }
        // The source, borrowed: `registered` holds it for as long as the event exists.
        let context = Unmanaged.passUnretained(source).toOpaque()
        let persistent = flags | Int32(EV_PERSIST)
        let added = Platform.libevent { () -> Int32 in
            if let event = source.registration.event {
                guard
                    rlk_event_assign(
                        event, base, source.fileDescriptor, persistent, LibeventBackend.onDescriptor, context)
                        == 0
                else { return -1 }
            } else {
                source.registration.event = rlk_event_new(
                    base, source.fileDescriptor, persistent, LibeventBackend.onDescriptor, context)
                guard source.registration.event != nil else { return -1 }
            }
            return event_add(source.registration.event, nil)
        }
        if case .failure(let failure) = added {
            release(source)
            let reason = failure.systemError.map { Platform.errnoName($0.code) } ?? "\(failure)"
            source.fail(
                LoopError(
                    "descriptor \(source.fileDescriptor) cannot be watched: epoll refused it (\(reason))",
                    systemError: failure.systemError?.code))
            return
        }
        source.registration.flags = Int16(flags)
        watchedCount += 1
    }

    /// Drops `source`'s registration (`event_free`) without closing its descriptor: the source is
    /// in no mode, and may be added again.
    func forget(_ source: LoopDescriptorSource) {
        assertLoopThread()
        guard source.registration.backend != nil else { return }
        unregister(source)
    }

    /// Drops `source`'s registration and closes its descriptor if the library owns it.
    private func release(_ source: LoopDescriptorSource) {
        unregister(source)
        source.closeOwnedDescriptor()
    }

    /// Frees `source`'s event and takes it out of `registered` (the last source takes its place).
    private func unregister(_ source: LoopDescriptorSource) {
        forgetEvent(of: source)
        let index = Int(source.registration.index)
        let last = registered.removeLast()
        if index < registered.count {
            registered[index] = last
            last.registration.index = Int32(index)
        }
        source.registration = LibeventRegistration()
    }

    private func forgetEvent(of source: LoopDescriptorSource) {
        if source.registration.flags != 0 {
            source.registration.flags = 0
            watchedCount -= 1
        }
        if let event = source.registration.event {
            event_free(event)  // also deletes it if pending
            source.registration.event = nil
        }
    }

    // MARK: The main dispatch queue

    /// Watches libdispatch's main-queue eventfd (`_dispatch_get_main_queue_handle_4CF`), as
    /// CoreFoundation does. Main loop, main thread only.
    func watchMainQueue() throws(LoopError) {
        assertLoopThread()
        guard mainQueueEvent == nil else { return }
        let handle = Platform.mainQueueHandle
        guard handle >= 0 else { throw LoopError.backend("libdispatch gave no main-queue handle") }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let base = self.base
        let event = try LibeventBackend.check(
            Platform.libevent {
                rlk_event_new(base, handle, Int32(EV_READ | EV_PERSIST), LibeventBackend.onMainQueue, context)
            }, "event_new(main queue)")
        mainQueueEvent = event
        try LibeventBackend.check(Platform.libevent { event_add(event, nil) }, "event_add(main queue)")
    }

    private static let onMainQueue: event_callback_fn = { descriptor, _, context in
        // Read back, or the level-triggered descriptor stays ready and the loop spins.
        drained(descriptor, context).events.mainQueueReady = true
    }

    // MARK: Callbacks (record only)

    private static let onDescriptor: event_callback_fn = { _, what, context in
        var fired: LoopDescriptorSource.Events = []
        if Int32(what) & Int32(EV_ET) != 0 {
            // A hang-up watch (see `watch`): readability there is a change, not input to read.
            if Int32(what) & Int32(EV_READ | EV_CLOSED) != 0 { fired.insert(.hangUp) }
        } else if Int32(what) & Int32(EV_READ) != 0 {
            fired.insert(.readable)
        }
        if Int32(what) & Int32(EV_WRITE) != 0 { fired.insert(.writable) }
        // The source is borrowed, not retained: the base calls back only for registered events,
        // whose sources the backend holds (retained, it cost four retains and three releases an
        // event).
        Unmanaged<LoopDescriptorSource>.fromOpaque(context!)._withUnsafeGuaranteedRef { source in
            source.registration.backend!.record(source, fired)
        }
    }

    /// A callback's record of a ready descriptor.
    private func record(_ source: LoopDescriptorSource, _ fired: LoopDescriptorSource.Events) {
        events.ready.append(ReadyDescriptor(source: source, events: fired))
        events.callbacks += 1
    }

    private static let onWake: event_callback_fn = { descriptor, _, context in
        drained(descriptor, context).events.woken = true
    }

    private static let onTimer: event_callback_fn = { descriptor, _, context in
        drained(descriptor, context).armed = nil
    }

    /// For the callbacks of the backend's own eventfds and timerfd: reads the descriptor's counter
    /// (level-triggered, it would stay ready) and counts the callback.
    private static func drained(_ descriptor: Int32, _ context: UnsafeMutableRawPointer?) -> LibeventBackend {
        let backend = Unmanaged<LibeventBackend>.fromOpaque(context!).takeUnretainedValue()
        Platform.drainEventDescriptor(descriptor)
        backend.events.callbacks += 1
        return backend
    }
}

/// A descriptor source's event in a `LibeventBackend`, stored in the source itself
/// (`LoopDescriptorSource.registration`); touched on the loop's thread only.
struct LibeventRegistration {
    /// Unchecked: the backend frees every event before it goes (`deinit`), and an `unowned` load
    /// on every event went through the runtime (a strong retain and release). nil: not registered.
    unowned(unsafe) var backend: LibeventBackend?
    var event: OpaquePointer?
    /// The source's place in the backend's `registered`.
    var index: Int32 = 0
    /// The EV_* flags the event is added with (all below 0x100); 0 when it is not added. Last and
    /// narrow, so that the registration ends two bytes after `index`.
    var flags: Int16 = 0

    init() {}

    init(backend: LibeventBackend, index: Int32) {
        self.backend = backend
        self.index = index
    }
}
