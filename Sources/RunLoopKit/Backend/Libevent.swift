internal import CLibevent
import Glibc

// The only file that talks to libevent. All of it runs on the loop's own thread.
//
// Callbacks only record what fired and return: user callouts run in Swift after
// `event_base_loop` has returned, so a callout may run the loop again (nested runs) without
// re-entering libevent, which refuses re-entrant `event_base_loop` calls.
//
// Timing does not use libevent's timer heap: its cached time comes from CLOCK_MONOTONIC_COARSE
// (4 ms steps here) and EVENT_BASE_FLAG_PRECISE_TIMER costs a timerfd_settime on every dispatch.
// Instead one timerfd per loop is armed at the loop's next wake-up time and re-armed only when that
// time changes, so a steady loop makes no timer system calls and wakes with nanosecond resolution.

/// What one dispatch of the event base observed.
struct BackendEvents {
    /// The loop's eventfd was read: a wake-up was consumed.
    var woken = false
    /// The wake-up timer expired.
    var timerExpired = false
    /// Number of libevent callbacks that ran.
    var callbacks = 0

    var isEmpty: Bool { callbacks == 0 }
}

final class LibeventBackend {
    private let base: OpaquePointer
    private var wakeEvent: OpaquePointer?
    private var timerEvent: OpaquePointer?
    private let wakeDescriptor: Int32
    private let timerDescriptor: Int32
    /// The instant the timerfd is armed for, or nil when disarmed.
    private var armed: ContinuousClock.Instant?
    /// Filled in by callbacks during one `poll`.
    private var events = BackendEvents()

    /// Whether the calling thread is the process's main thread (`gettid() == getpid()`).
    static var isMainThread: Bool { rlk_gettid() == getpid() }

    /// Names the calling thread: `prctl(PR_SET_NAME)`, which keeps the first 15 bytes.
    static func setCurrentThreadName(_ name: String) {
        rlk_set_thread_name(name)
    }

    /// `eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)`: the descriptor other threads write to wake a loop.
    /// Created with the loop, on any thread; it is not a libevent object.
    static func makeWakeDescriptor() -> Int32 {
        let descriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(descriptor >= 0, "RunLoopKit: eventfd() failed (errno \(errno)); cannot create a loop")
        return descriptor
    }

    /// `event_base_new_with_config` with no locking (only the loop's thread uses the base), plus the
    /// persistent read events of the wake-up eventfd (owned by the loop) and of a new timerfd.
    init(wakeDescriptor: Int32) throws(LoopError) {
        self.wakeDescriptor = wakeDescriptor
        guard let config = event_config_new() else { throw LoopError.backend("event_config_new failed") }
        defer { event_config_free(config) }
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        guard let base = event_base_new_with_config(config) else {
            throw LoopError.backend("event_base_new_with_config failed (errno \(errno))")
        }
        self.base = base
        let timerDescriptor = timerfd_create(CLOCK_BOOTTIME, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        guard timerDescriptor >= 0 else {
            let code = errno
            event_base_free(base)
            throw LoopError.backend("timerfd_create failed (errno \(code))")
        }
        self.timerDescriptor = timerDescriptor
        let context = Unmanaged.passUnretained(self).toOpaque()
        let persistentRead = Int32(EV_READ | EV_PERSIST)
        wakeEvent = rlk_event_new(base, wakeDescriptor, persistentRead, LibeventBackend.onWake, context)
        timerEvent = rlk_event_new(base, timerDescriptor, persistentRead, LibeventBackend.onTimer, context)
        try checkError(wakeEvent == nil ? -1 : event_add(wakeEvent, nil), "event_add(wake-up eventfd)")
        try checkError(timerEvent == nil ? -1 : event_add(timerEvent, nil), "event_add(timerfd)")
    }

    deinit {
        if let wakeEvent { event_free(wakeEvent) }
        if let timerEvent { event_free(timerEvent) }
        event_base_free(base)
        close(timerDescriptor)
    }

    private func checkError(_ code: Int32, _ call: String) throws(LoopError) {
        if code != 0 { throw LoopError.backend("\(call) failed (errno \(errno))") }
    }

    // MARK: Dispatch

    /// Dispatches ready events without blocking: `event_base_loop(EVLOOP_NONBLOCK)`.
    func pollNow() -> BackendEvents {
        dispatch(Int32(EVLOOP_NONBLOCK))
    }

    /// Blocks until an event is ready or `deadline` (nil: no deadline) passes:
    /// `event_base_loop(EVLOOP_ONCE)` with the timerfd armed for `deadline`.
    func wait(until deadline: ContinuousClock.Instant?) -> BackendEvents {
        arm(deadline)
        return dispatch(Int32(EVLOOP_ONCE))
    }

    private func dispatch(_ flags: Int32) -> BackendEvents {
        events = BackendEvents()
        let code = event_base_loop(base, flags)
        // -1 means libevent failed internally (the base is never re-entered: callbacks only record).
        precondition(code >= 0, "RunLoopKit: event_base_loop failed (errno \(errno))")
        return events
    }

    /// `timerfd_settime` (relative, CLOCK_BOOTTIME like ContinuousClock), only when the wanted
    /// instant differs from the armed one; nil disarms it so that no stale wake-up happens.
    private func arm(_ deadline: ContinuousClock.Instant?) {
        guard deadline != armed else { return }
        var spec = itimerspec()
        if let deadline {
            let delay = max(deadline - .now, .nanoseconds(1))
            let (seconds, attoseconds) = delay.components
            spec.it_value.tv_sec = Int(seconds)
            spec.it_value.tv_nsec = max(Int(attoseconds / 1_000_000_000), seconds == 0 ? 1 : 0)
        }
        let code = timerfd_settime(timerDescriptor, 0, &spec, nil)
        precondition(code == 0, "RunLoopKit: timerfd_settime failed (errno \(errno))")
        armed = deadline
    }

    // MARK: Callbacks (record only)

    private static let onWake: event_callback_fn = { descriptor, _, context in
        let backend = Unmanaged<LibeventBackend>.fromOpaque(context!).takeUnretainedValue()
        var count: UInt64 = 0
        _ = read(descriptor, &count, MemoryLayout<UInt64>.size)
        backend.events.woken = true
        backend.events.callbacks += 1
    }

    private static let onTimer: event_callback_fn = { descriptor, _, context in
        let backend = Unmanaged<LibeventBackend>.fromOpaque(context!).takeUnretainedValue()
        var expirations: UInt64 = 0
        _ = read(descriptor, &expirations, MemoryLayout<UInt64>.size)
        backend.armed = nil
        backend.events.timerExpired = true
        backend.events.callbacks += 1
    }
}
