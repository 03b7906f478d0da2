internal import CPlatform
import Glibc

/// The Linux calls RunLoopKit makes beyond libevent, each wrapped once (the C side is
/// `Sources/CPlatform`): thread identity, the continuous clock, eventfds and timerfds, descriptor
/// checks, signal routing, sockets, pidfds and libdispatch's main-queue hooks. Any thread, unless a member says
/// otherwise.
enum Platform {
    // MARK: Threads

    /// Whether the calling thread is the process's main thread (`gettid() == getpid()`).
    static var isMainThread: Bool { rlk_gettid() == getpid() }

    /// The calling thread's loop, unretained, as `ThreadSlot.key` holds it: a thread-local copy,
    /// because the key is read on every item added or removed (callgrind, `runloop-bench --filter
    /// churn`: two `pthread_getspecific` calls were 34 of a timer's instructions).
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

    // MARK: Event and timer descriptors

    /// `eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)`: what other threads (and signal handlers) write to
    /// wake a loop. Throws with `systemError` set, `EMFILE` or `ENFILE` once descriptors ran out.
    static func openEventDescriptor() throws(LoopError) -> Int32 {
        let descriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard descriptor >= 0 else { throw LoopError.systemCall("eventfd", failedWith: errno) }
        return descriptor
    }

    /// Throws unless `count` more descriptors can be opened now: opens that many eventfds (which
    /// need no file system) and closes them again. Throws with `systemError` set, `EMFILE` or
    /// `ENFILE` once descriptors ran out.
    static func checkDescriptorsFree(_ count: Int) throws(LoopError) {
        var opened: [Int32] = []
        opened.reserveCapacity(count)
        defer { for descriptor in opened { close(descriptor) } }
        for _ in 0..<count {
            let descriptor = eventfd(0, Int32(EFD_CLOEXEC))
            guard descriptor >= 0 else { throw LoopError.systemCall("eventfd", failedWith: errno) }
            opened.append(descriptor)
        }
    }

    /// `openEventDescriptor()` for a caller that cannot report a failure: it stops the process.
    static func makeEventDescriptor() -> Int32 {
        do {
            return try openEventDescriptor()
        } catch {
            preconditionFailure("RunLoopKit: cannot open an eventfd: \(error.plainReason)")
        }
    }

    /// Adds one to an eventfd's counter.
    @inline(__always)
    static func signalEventDescriptor(_ descriptor: Int32) {
        var one: UInt64 = 1
        _ = write(descriptor, &one, MemoryLayout<UInt64>.size)
    }

    /// Reads (and so resets) an eventfd's or timerfd's counter; false if there was nothing to read.
    @discardableResult
    static func drainEventDescriptor(_ descriptor: Int32) -> Bool {
        var count: UInt64 = 0
        return read(descriptor, &count, MemoryLayout<UInt64>.size) == MemoryLayout<UInt64>.size
    }

    /// `timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC)`: `ContinuousClock`'s clock.
    static func makeTimerDescriptor() throws(LoopError) -> Int32 {
        let descriptor = timerfd_create(CLOCK_BOOTTIME, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        guard descriptor >= 0 else {
            let code = errno
            throw LoopError.backend("timerfd_create failed (errno \(code))", systemError: code)
        }
        return descriptor
    }

    /// Arms a timerfd `delay` nanoseconds from now (at least 1: all zeros would disarm it), or
    /// disarms it for nil.
    static func armTimerDescriptor(_ descriptor: Int32, in delay: Int64?) {
        var spec = itimerspec()
        if let delay {
            let delay = max(delay, 1)
            spec.it_value.tv_sec = Int(delay / 1_000_000_000)
            spec.it_value.tv_nsec = Int(delay % 1_000_000_000)
        }
        let code = timerfd_settime(descriptor, 0, &spec, nil)
        precondition(code == 0, "RunLoopKit: timerfd_settime failed (errno \(errno))")
    }

    static func closeDescriptor(_ descriptor: Int32) {
        close(descriptor)
    }

    /// `open("/dev/null", O_RDONLY | O_CLOEXEC)`: a descriptor held only to be given up when the
    /// process runs out (a listener's reserve). The descriptor, or -1 with `errno` set.
    static func openPlaceholderDescriptor() -> Int32 {
        open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// `unlink(path)`: removes a file system entry, such as a Unix socket's path; a path that is
    /// already gone is not an error.
    static func removePath(_ path: String) {
        unlink(path)
    }

    /// Throws unless `descriptor` is open and of a kind epoll can watch: `fstat`.
    static func validateWatchable(_ descriptor: Int32) throws(LoopError) {
        let type = rlk_descriptor_type(descriptor)
        if type < 0 {
            throw LoopError(
                "descriptor \(descriptor) cannot be watched: it is not open (\(errnoName(-type)))", systemError: -type)
        }
        // S_IFREG and S_IFDIR: the constants import ambiguously from Glibc.
        if type == 0o100000 || type == 0o040000 {
            let kind = type == 0o100000 ? "regular file" : "directory"
            throw LoopError("descriptor \(descriptor) cannot be watched: it is a \(kind), which is always ready")
        }
    }

    /// A short name for the errno values descriptor checks report.
    static func errnoName(_ code: Int32) -> String {
        switch code {
        case EBADF: "EBADF"
        case EPERM: "EPERM"
        case ENOENT: "ENOENT"
        case EEXIST: "EEXIST"
        default: "errno \(code)"
        }
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
        let slot = signalRoutes.withLock { _ in rlk_signal_attach(signal, descriptor) }
        rlk_signal_unblock(signal)
        precondition(
            slot != -1, "RunLoopKit: more than \(RLK_SIGNAL_SLOTS) live LoopSignalSources for signal \(signal)")
        precondition(slot >= 0, "RunLoopKit: sigaction(\(signal)) failed (errno \(errno))")
        return (descriptor, slot)
    }

    /// Unroutes a signal; on return no signal handler is writing to the route's eventfd.
    static func releaseSignal(_ signal: Int32, slot: Int32) {
        signalRoutes.withLock { _ in rlk_signal_detach(signal, slot) }
    }

    // MARK: Sockets

    /// `MSG_NOSIGNAL`: what every send passes, so that a peer that has gone raises no SIGPIPE.
    static var noSignal: Int32 { rlk_msg_nosignal() }

    /// `SOCK_STREAM`, for `getaddrinfo` hints.
    static var streamKind: Int32 { rlk_sock_stream() }

    /// `SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC`: the sockets listeners and connections make.
    static var streamSocketType: Int32 { rlk_stream_socket_type() }

    /// `socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)`: the two connected ends, both blocking, or
    /// nil with `errno` set.
    static func streamSocketPair() -> (Int32, Int32)? {
        var ends: [Int32] = [-1, -1]
        guard rlk_stream_socket_pair(&ends) == 0 else { return nil }
        return (ends[0], ends[1])
    }

    /// `accept4(SOCK_NONBLOCK | SOCK_CLOEXEC)`, which Swift's Glibc module does not declare: the
    /// new socket is non-blocking and not inherited by child processes, in one system call.
    /// Returns the descriptor, or -1 with `errno` set.
    static func accept(
        _ listener: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: UnsafeMutablePointer<socklen_t>
    ) -> Int32 {
        rlk_accept(listener, address, length)
    }

    // MARK: Child processes

    /// `pidfd_open(pid, 0)`: the descriptor, or -1 with `errno` set.
    static func pidfdOpen(_ pid: pid_t) -> Int32 { rlk_pidfd_open(pid) }

    /// `pidfd_send_signal(pidfd, signal, NULL, 0)`: nil, or the errno on failure.
    static func pidfdSendSignal(_ pidfd: Int32, _ signal: Int32) -> Int32? {
        rlk_pidfd_send_signal(pidfd, signal) == 0 ? nil : errno
    }

    /// `posix_spawn_file_actions_addclosefrom_np`: 0, or an errno.
    static func spawnAddCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32 {
        rlk_spawn_add_close_from(actions, from)
    }

    /// `posix_spawn_file_actions_addchdir_np`: 0, or an errno.
    static func spawnAddChdir(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ path: String) -> Int32 {
        rlk_spawn_add_chdir(actions, path)
    }

    // MARK: The main dispatch queue

    /// libdispatch's main-queue eventfd (`_dispatch_get_main_queue_handle_4CF`), or a negative
    /// number if it has none. Main thread only.
    static var mainQueueHandle: Int32 { rlk_main_queue_handle() }

    /// Runs the blocks queued on the main dispatch queue (`_dispatch_main_queue_callback_4CF`);
    /// libdispatch writes its eventfd again if it left some for later. Main thread only.
    static func drainMainQueue() {
        rlk_main_queue_drain()
    }
}
