internal import CPlatform
import Glibc

// Descriptors: eventfds, timerfds, plain files, and what any descriptor needs (closing, copying,
// checking, non-blocking). The EINTR rule: SystemCall.swift.

extension Platform {
    // MARK: Event and timer descriptors

    /// `eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)`: what other threads (and signal handlers) write to
    /// wake a loop. Throws with `systemError` set, `EMFILE` or `ENFILE` once descriptors ran out.
    static func openEventDescriptor() throws(LoopError) -> Int32 {
        try eventDescriptor(flags: EFD_NONBLOCK | EFD_CLOEXEC).get(failing: "eventfd")
    }

    /// `eventfd(0, flags)`.
    private static func eventDescriptor(flags: Int) -> Result<Int32, Errno> {
        retryingInterrupts { eventfd(0, Int32(flags)) }
    }

    /// Throws unless `count` more descriptors can be opened now: opens that many eventfds (which
    /// need no file system) and closes them again. Throws with `systemError` set, `EMFILE` or
    /// `ENFILE` once descriptors ran out.
    static func checkDescriptorsFree(_ count: Int) throws(LoopError) {
        var opened: [Int32] = []
        opened.reserveCapacity(count)
        defer { for descriptor in opened { closeDescriptor(descriptor) } }
        for _ in 0..<count {
            opened.append(try eventDescriptor(flags: EFD_CLOEXEC).get(failing: "eventfd"))
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
        _ = retryingInterrupts { write(descriptor, &one, MemoryLayout<UInt64>.size) }
    }

    /// Reads (and so resets) an eventfd's or timerfd's counter; false if there was nothing to read.
    @discardableResult
    static func drainEventDescriptor(_ descriptor: Int32) -> Bool {
        var count: UInt64 = 0
        let drained = withUnsafeMutableBytes(of: &count) { read(descriptor, into: $0) }
        return (try? drained.get()) == MemoryLayout<UInt64>.size
    }

    /// `timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC)`: `ContinuousClock`'s clock.
    static func makeTimerDescriptor() throws(LoopError) -> Int32 {
        let created = retryingInterrupts { timerfd_create(CLOCK_BOOTTIME, Int32(TFD_NONBLOCK | TFD_CLOEXEC)) }
        do {
            return try created.get(failing: "timerfd_create")
        } catch {
            throw LoopError.backend(error.message, systemError: error.systemError)
        }
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
        let armed = retryingInterrupts { timerfd_settime(descriptor, 0, &spec, nil) }.map { _ in }
        if case .failure(let failure) = armed { preconditionFailure("RunLoopKit: timerfd_settime failed: \(failure)") }
    }

    // MARK: Any descriptor

    /// `close`, never retried (see the EINTR rule); a failure leaves nothing to do.
    static func closeDescriptor(_ descriptor: Int32) {
        _ = close(descriptor)
    }

    /// `read`: up to `buffer.count` bytes into `buffer`, how many it read (0 at the end of a file).
    static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
        retryingInterrupts { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// `fcntl(F_DUPFD_CLOEXEC)`: a close-on-exec copy of `descriptor` numbered `lowest` or above.
    static func duplicate(_ descriptor: Int32, atLeast lowest: Int32) -> Result<Int32, Errno> {
        retryingInterrupts { fcntl(descriptor, F_DUPFD_CLOEXEC, lowest) }
    }

    /// Sets `O_NONBLOCK` on `descriptor` (`fcntl`).
    @discardableResult
    static func setNonBlocking(_ descriptor: Int32) -> Result<Void, Errno> {
        retryingInterrupts { fcntl(descriptor, F_GETFL) }.flatMap { flags in
            retryingInterrupts { fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) }.map { _ in }
        }
    }

    /// Throws unless `descriptor` is open (`fstat`; `EBADF`) and of a kind epoll can watch
    /// (`EPERM`): not a regular file or directory, and taken by a scratch epoll instance
    /// (`rlk_epoll_probe`), which refuses what never becomes ready, such as `/dev/null`.
    static func validateWatchable(_ descriptor: Int32) throws(LoopError) {
        let type: Int32
        switch descriptorType(descriptor) {
        case .success(let found): type = found
        case .failure(let failure):
            throw LoopError(
                "descriptor \(descriptor) cannot be watched: it is not open (\(errnoName(failure.code)))",
                systemError: failure.code)
        }
        // S_IFREG and S_IFDIR: the constants import ambiguously from Glibc.
        if type == 0o100000 || type == 0o040000 {
            let kind = type == 0o100000 ? "regular file" : "directory"
            throw LoopError(
                "descriptor \(descriptor) cannot be watched: it is a \(kind), which is always ready", systemError: EPERM
            )
        }
        let probe = rlk_epoll_probe(descriptor)
        if probe < 0 {
            let device = type == 0o020000 ? " (a character device, such as /dev/null)" : ""
            throw LoopError(
                "descriptor \(descriptor) cannot be watched: epoll refuses it\(device) (\(errnoName(-probe)))",
                systemError: -probe)
        }
    }

    /// The epoll descriptor of this process that has `descriptor` registered, or nil (none has
    /// it, or /proc/self/fd cannot be read): `rlk_epoll_watching`, through /proc/self/fdinfo.
    static func epollDescriptor(watching descriptor: Int32) -> Int32? {
        let found = rlk_epoll_watching(descriptor)
        return found >= 0 ? found : nil
    }

    /// `fstat`'s file type bits (`S_IFMT`) for `descriptor`.
    private static func descriptorType(_ descriptor: Int32) -> Result<Int32, Errno> {
        let type = rlk_descriptor_type(descriptor)  // the type, or -errno
        return type < 0 ? .failure(Errno(-type)) : .success(type)
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

    // MARK: Files

    /// `open(path, O_RDONLY | O_CLOEXEC)`.
    static func openForReading(_ path: String) -> Result<Int32, Errno> {
        retryingInterrupts { open(path, O_RDONLY | O_CLOEXEC) }
    }

    /// `/dev/null` opened for reading: a descriptor held only to be given up when the process runs
    /// out (a listener's reserve).
    static func openPlaceholderDescriptor() -> Result<Int32, Errno> {
        openForReading("/dev/null")
    }

    /// The first `limit` bytes or fewer of the file at `path`, from one `read` (enough for the short
    /// files of /proc, which the kernel writes whole): `open`, `read`, `close`.
    static func readShortFile(_ path: String, limit: Int) -> Result<[UInt8], Errno> {
        openForReading(path).flatMap { descriptor in
            defer { closeDescriptor(descriptor) }
            var bytes = [UInt8](repeating: 0, count: limit)
            return bytes.withUnsafeMutableBytes { read(descriptor, into: $0) }.map { Array(bytes[0..<$0]) }
        }
    }

    /// The target of the symbolic link at `path` (`readlink`), up to 255 bytes of it.
    static func linkTarget(_ path: String) -> Result<String, Errno> {
        var bytes = [UInt8](repeating: 0, count: 256)
        return bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                retryingInterrupts { readlink(path, chars.baseAddress!, chars.count - 1) }
            }
        }.map { String(decoding: bytes[0..<$0], as: UTF8.self) }
    }

    /// `unlink(path)`: removes a file system entry, such as a Unix socket's path; a path that is
    /// already gone is not an error.
    static func removePath(_ path: String) {
        _ = retryingInterrupts { unlink(path) }
    }

    /// Whether `path` names a directory (`stat`, following links).
    static func isDirectory(_ path: String) -> Result<Bool, Errno> {
        var info = stat()
        return retryingInterrupts { stat(path, &info) }.map { _ in info.st_mode & S_IFMT == S_IFDIR }
    }
}
