internal import CPlatform
import Glibc

/// The one layer for the system calls RunLoopKit makes beyond libevent (the C side is
/// `Sources/CPlatform`): here thread names, the clocks, signal routing and libdispatch's
/// main-queue hooks; descriptors, sockets, child processes and threads in the `Platform+` files,
/// by the rules of SystemCall.swift (typed results, one EINTR rule). A call may have more than one
/// wrapper (`send` of bytes and of vectors). Any thread, unless a member says otherwise.
enum Platform {
    // MARK: Threads

    /// Whether the calling thread is the process's main thread (`gettid() == getpid()`).
    static var isMainThread: Bool { rlk_gettid() == getpid() }

    /// The process's id (`getpid`).
    static var processID: Int32 { getpid() }

    /// The calling thread's loop, unretained, as `ThreadSlot.key` holds it: a thread-local copy,
    /// because the key is read on every item added or removed
    /// (docs/performance-notes.md#instructions-per-timer).
    @inline(__always)
    static var currentLoopPointer: UnsafeMutableRawPointer? {
        get { rlk_get_current_loop() }
        set { rlk_set_current_loop(newValue) }
    }

    /// Names the calling thread: `prctl(PR_SET_NAME)`, which keeps the first 15 bytes.
    static func setCurrentThreadName(_ name: String) {
        rlk_set_thread_name(name)
    }

    /// A spin-wait hint to the processor (`pause` on x86, `yield` on Arm).
    @inline(__always)
    static func cpuRelax() { rlk_cpu_relax() }

    /// The clock `ContinuousClock` reads on Linux (`CLOCK_BOOTTIME`: monotonic, and counting a
    /// suspended system's sleep), in nanoseconds since its epoch.
    @inline(__always)
    static func continuousClockNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        return Int64(now.tv_sec) &* 1_000_000_000 &+ Int64(now.tv_nsec)
    }

    /// `CLOCK_MONOTONIC_COARSE` in nanoseconds: the kernel's last tick, a few milliseconds behind
    /// at most, and a plain memory read where the continuous clock reads the time stamp counter.
    @inline(__always)
    static func coarseClockNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// The step of `coarseClockNanoseconds()`, in nanoseconds (`clock_getres`).
    static func coarseClockResolution() -> Int64 {
        var step = timespec()
        clock_getres(CLOCK_MONOTONIC_COARSE, &step)
        return Int64(step.tv_sec) * 1_000_000_000 + Int64(step.tv_nsec)
    }

    // MARK: Signals

    /// Serialises attaching and detaching signal routes (the handler itself takes no lock).
    private static let signalRoutes = Locked(())

    /// Creates an eventfd and routes `signal` to it (`sigaction` on the first route of a signal),
    /// and unblocks the signal in the calling thread.
    static func catchSignal(_ signal: Int32) -> (descriptor: Int32, slot: Int32) {
        precondition(
            signal > 0 && signal <= 64 && signal != SIGKILL && signal != SIGSTOP,
            "RunLoopKit: signal \(signal) cannot be caught (SIGKILL, SIGSTOP and numbers outside 1...64 cannot)")
        let descriptor = makeEventDescriptor()
        // -1: every slot taken; -2: sigaction failed, its errno read at once.
        let (slot, failure) = signalRoutes.withLock { _ in
            let slot = rlk_signal_attach(signal, descriptor)
            return (slot, slot == -2 ? Errno.current : nil)
        }
        rlk_signal_unblock(signal)
        precondition(
            slot != -1, "RunLoopKit: more than \(RLK_SIGNAL_SLOTS) live LoopSignalSources for signal \(signal)")
        if let failure { preconditionFailure("RunLoopKit: sigaction(\(signal)) failed: \(failure)") }
        return (descriptor, slot)
    }

    /// Unroutes a signal; on return no signal handler is writing to the route's eventfd.
    static func releaseSignal(_ signal: Int32, slot: Int32) {
        signalRoutes.withLock { _ in rlk_signal_detach(signal, slot) }
    }

    // MARK: The main dispatch queue

    /// libdispatch's main-queue eventfd (`_dispatch_get_main_queue_handle_4CF`), or a negative
    /// number if it has none. Main thread only.
    static var mainQueueHandle: Int32 { rlk_main_queue_handle() }

    /// Whether libdispatch has signalled main-queue work that no one has read yet (`poll` of its
    /// eventfd, which is left as it is). Main thread only.
    static var mainQueueHasWork: Bool {
        let handle = mainQueueHandle
        guard handle >= 0 else { return false }
        var entry = pollfd(fd: handle, events: Int16(POLLIN), revents: 0)
        let ready = retryingInterrupts { poll(&entry, 1, 0) }
        return (try? ready.get()) == 1 && entry.revents & Int16(POLLIN) != 0
    }

    /// Runs the blocks queued on the main dispatch queue (`_dispatch_main_queue_callback_4CF`);
    /// libdispatch writes its eventfd again if it left some for later. Main thread only.
    static func drainMainQueue() {
        rlk_main_queue_drain()
    }
}
