import Glibc
import Synchronization

/// A child process, started with `posix_spawn` and watched through a pidfd by the loop it is
/// added to: its exit is delivered on that loop's thread, in the modes that hold the process.
///
/// ```swift
/// let child = try LoopProcess(executable: "/bin/sh", arguments: ["-c", "exit 3"])
/// child.onExit { _, status in print(status) }     // .exited(3), on the loop's thread
/// loop.add(child, forMode: .default)
/// ```
///
/// The process reaps only its own child (`waitid(P_PIDFD)`), never with `waitpid(-1)` and never by
/// changing `SIGCHLD`'s action, so other code's children stay waitable by that code. A process
/// added to a loop keeps working when the caller drops it: its `onExit` still runs. Once its exit
/// is delivered, or once it is in no mode and no longer referenced, it holds nothing: a child
/// still running then is reaped by the library when it exits, so none is left a zombie.
///
/// Thread rules: every member may be called from any thread; `onExit` handlers run on the loop's
/// thread. A process belongs to one loop: adding it to a second one is a programmer error.
public final class LoopProcess: @unchecked Sendable {
    /// What the child's standard input, output or error is.
    public enum Stdio: Sendable, Equatable {
        /// The parent's descriptor, shared.
        case inherit
        /// `/dev/null`: reads see end of file, writes are discarded.
        case null
        /// A stream to this process: one end of a Unix socket pair is the child's descriptor, the
        /// other is the process's ``LoopProcess/standardInput``, ``LoopProcess/standardOutput``
        /// or ``LoopProcess/standardError`` connection, served by the loop the process is added to.
        case connection
    }

    /// How the child ended.
    public enum Status: Sendable, Equatable, CustomStringConvertible {
        /// It exited with this code.
        case exited(Int32)
        /// A signal ended it (e.g. `SIGKILL`).
        case signalled(Int32)

        /// `exited(code)` or `signalled(number)`.
        public var description: String {
            switch self {
            case .exited(let code): "exited(\(code))"
            case .signalled(let signal): "signalled(\(signal))"
            }
        }
    }

    /// The child's process id.
    ///
    /// Any thread. Use ``signal(_:)`` rather than `kill(pid, …)`: after the child is reaped its
    /// id may belong to another process, its pidfd never does.
    public let pid: Int32

    /// The stream to the child's standard input, for `standardInput: .connection`; nil otherwise.
    ///
    /// Any thread, like every member of the connection. It joins the process's loop, in the same
    /// modes, when the process is added to a loop; calls made before are applied then. Write to
    /// it, and `shutdownOutput()` or `close()` it for the child to see the end of its input.
    public let standardInput: LoopConnection?
    /// The stream from the child's standard output, for `standardOutput: .connection`; nil
    /// otherwise.
    ///
    /// Any thread; it joins the process's loop as ``standardInput`` does. Its output arrives
    /// through `onRead` or `read(maxLength:)`; `readClosed` then `closed` follow once the child
    /// (and every process it passed the descriptor to) has exited or closed it.
    public let standardOutput: LoopConnection?
    /// The stream from the child's standard error, for `standardError: .connection`; nil
    /// otherwise.
    ///
    /// Any thread; as ``standardOutput``.
    public let standardError: LoopConnection?

    struct State: @unchecked Sendable {  // the handler only ever runs on the loop thread
        /// The child's pidfd; -1 once it is reaped (or handed to the reaper at deinit).
        var pidfd: Int32
        var status: Status?
        /// Why there never will be a status: other code reaped the child.
        var failure: LoopError?
        var handler: ((LoopProcess, Status) -> Void)?
        var waiters: [UInt64: CheckedContinuation<Status, any Error>] = [:]
        var nextWaiter: UInt64 = 0
        /// Where the exit was delivered: a handler set afterwards is queued there.
        var deliveredOn: (loop: Loop, mode: Loop.Mode)?
        /// The loop last watching the child (a copy of `Watching.loop` readable under this lock).
        weak var loop: Loop?
    }

    /// The loop the process is bound to and the source watching its pidfd there (over its own
    /// duplicate of the pidfd, closed by the loop once libevent has let go of it). Taken before
    /// `state` when both are needed; never taken inside a handler release (see `Watch`).
    struct Watching {
        weak var loop: Loop?
        var source: LoopDescriptorSource?
    }

    let state: Locked<State>
    let watching = Locked(Watching())
    /// Whether the child was started with `newProcessGroup`: its process group's id is `pid`.
    let leadsProcessGroup: Bool

    /// Starts `executable` with `arguments`, in `environment` (nil: this process's) and
    /// `workingDirectory` (nil: this process's).
    ///
    /// `executable` with a "/" is a path (absolute, or relative to the current directory); a bare
    /// name is looked up in `PATH` as `execvp` does, in the `PATH` the child gets: `environment`'s
    /// when it is given (`/bin:/usr/bin` if it has none), this process's otherwise. The child's
    /// `argv[0]` is `executable` as given. With `newProcessGroup`, the child leads a process group
    /// of its own (its id is the child's pid), which ``signalGroup(_:)`` signals as a whole.
    ///
    /// Any thread. Only the standard descriptors reach the child: every other descriptor of this
    /// process is closed in it. Each stream asked as `.connection` gets a socket pair: the child's
    /// end becomes its descriptor 0, 1 or 2, this process keeps the other (close-on-exec). The child starts with an empty signal mask and every signal at its
    /// default action. Throws a `LoopError` with `systemError` set if the working directory is
    /// missing or not a directory, or if the executable is missing (`ENOENT`, also when a bare name is
    /// in no directory of `PATH`) or cannot be executed (`EACCES`); nothing is started then.
    public init(
        executable: String, arguments: [String] = [], environment: [String: String]? = nil,
        workingDirectory: String? = nil,
        standardInput: Stdio = .inherit, standardOutput: Stdio = .inherit,
        standardError: Stdio = .inherit, newProcessGroup: Bool = false
    ) throws(LoopError) {
        let (pid, pidfd, streams) = try LoopProcess.spawn(
            executable: executable, arguments: arguments, environment: environment,
            workingDirectory: workingDirectory, stdio: [standardInput, standardOutput, standardError],
            newProcessGroup: newProcessGroup)
        self.pid = pid
        self.leadsProcessGroup = newProcessGroup
        self.state = Locked(State(pidfd: pidfd))
        let connections = streams.map { $0.map(LoopConnection.init(childStream:)) }
        self.standardInput = connections[0]
        self.standardOutput = connections[1]
        self.standardError = connections[2]
    }

    deinit {
        // Nothing watches any more: a source's handler keeps the process alive until the source is
        // invalidated. This may run inside that invalidation (holding the source's lock), so the
        // source is left alone.
        let pidfd = state.withLock { $0.pidfd }
        guard pidfd >= 0 else { return }
        if Platform.reap(pidfd) == nil {
            ProcessReaper.adopt(pidfd)  // still running: reaped when it exits
        } else {
            Platform.closeDescriptor(pidfd)
        }
    }

    /// How the child ended, once its loop has delivered the exit; nil before.
    ///
    /// Any thread.
    public var status: Status? { state.withLock { $0.status } }

    /// Sets what runs when the child exits, on the loop's thread in a mode that holds the process.
    ///
    /// Any thread. Replaces an earlier handler. Set after the exit was delivered, the handler is
    /// queued at once on that loop, in the mode the exit was delivered in.
    public func onExit(_ handler: sending @escaping (LoopProcess, Status) -> Void) {
        // A replaced handler goes after the lock: its captures may call back into the process.
        var replaced: ((LoopProcess, Status) -> Void)?
        let late: (Loop, Loop.Mode, Status)? = state.withLock { state in
            guard let status = state.status, let (loop, mode) = state.deliveredOn else {
                replaced = state.handler.take()
                state.handler = handler
                return nil
            }
            return (loop, mode, status)
        }
        withExtendedLifetime(replaced) {}
        guard let (loop, mode, status) = late else { return }
        let call = UncheckedHandler(handler)
        loop.perform(inModes: [mode]) { call.handler(self, status) }
    }

    /// Waits for the child's exit, delivered by the loop the process is in.
    ///
    /// Any thread or task. Returns at once if the exit was already delivered. Throws a `LoopError`
    /// if the loop the process was added to ends before the child does or has ended (add the
    /// process to another loop to wait again), or if other code reaped the child, and
    /// `CancellationError` if the calling task is cancelled first.
    public func exitStatus() async throws -> Status {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Status, any Error>) in
                let now: Result<Status, any Error>? = state.withLock { state in
                    if let status = state.status { return .success(status) }
                    if let failure = state.failure { return .failure(failure) }
                    // Read under the lock: a cancellation handler that ran before finds no waiter.
                    if Task.isCancelled { return .failure(CancellationError()) }
                    // Checked under the lock: a loop ending later fails the waiters it finds here.
                    if let loop = state.loop, LoopProcess.hasEnded(loop) { return .failure(self.loopEnded) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }

    /// Sends `signal` to the child (`pidfd_send_signal`, so never to a process that reused its id).
    ///
    /// Any thread. Does nothing once the child has been reaped. A number that is not a signal is a
    /// programmer error.
    public func signal(_ signal: Int32) {
        let sent = state.withLock { state -> Result<Void, Errno> in
            guard state.pidfd >= 0, state.status == nil else { return .success(()) }
            return Platform.pidfdSendSignal(state.pidfd, signal)
        }
        if case .failure(let failure) = sent, failure == Errno(EINVAL) {
            preconditionFailure("RunLoopKit: LoopProcess.signal(_:) got \(signal), which is not a signal number")
        }
    }

    /// Sends `signal` to every process of the child's process group (`kill(-pid, signal)`): the
    /// child and what it started and did not move to another group, such as a shell's commands.
    ///
    /// Any thread. Needs a process started with `newProcessGroup: true`; otherwise, and for a
    /// number that is not a signal, a programmer error. The group's id is the child's pid, which
    /// the system may give to another process once the child is reaped, so the group is signalled
    /// only while the child is not: from its start until its exit is delivered (an exited child
    /// not yet delivered is still unreaped, and its group is reached). Once the exit was
    /// delivered, this does nothing, even if processes of the group still run: end those before,
    /// or through the streams they hold. (Code that reaps other code's children with
    /// `waitpid(-1)` takes that guarantee away, as it does for every `pid`.)
    public func signalGroup(_ signal: Int32) {
        precondition(
            leadsProcessGroup,
            "RunLoopKit: LoopProcess.signalGroup(_:) needs a process started with newProcessGroup: true")
        // Under the lock that reaping takes: the child cannot be reaped, and its pid reused, before
        // the signal is sent.
        let sent = state.withLock { state -> Result<Void, Errno> in
            guard state.pidfd >= 0, state.status == nil, state.failure == nil else { return .success(()) }
            return Platform.signalProcessGroup(pid, signal)
        }
        if case .failure(let failure) = sent, failure == Errno(EINVAL) {
            preconditionFailure("RunLoopKit: LoopProcess.signalGroup(_:) got \(signal), which is not a signal number")
        }
    }

    // MARK: Loop machinery

    /// The source that watches the child on `loop`, made on first use; nil if there is nothing to
    /// watch any more. Binds the process to `loop`.
    func watchSource(on loop: Loop) -> LoopDescriptorSource? {
        watching.withLock { watching in
            if let source = watching.source {
                if source.isValid { return source }
                watching.source = nil  // its loop ended
            }
            guard !LoopProcess.hasEnded(loop) else { return nil }
            // A process whose loop ended may join another loop.
            if let bound = watching.loop, LoopProcess.hasEnded(bound) { watching.loop = nil }
            let pidfd = state.withLock { $0.status == nil && $0.failure == nil ? $0.pidfd : -1 }
            guard pidfd >= 0 else { return nil }
            let copy: Int32
            switch Platform.duplicate(pidfd, atLeast: 3) {
            case .success(let made): copy = made
            case .failure(let failure):
                preconditionFailure("RunLoopKit: cannot duplicate the pidfd of process \(pid): \(failure)")
            }
            bindOwner(&watching.loop, to: loop, kind: "LoopProcess")
            state.withLock { $0.loop = loop }
            let watch = Watch(self, loop: loop)
            let source = LoopDescriptorSource(unchecked: copy, events: .readable, closesDescriptor: true) { _, _ in
                watch.childMayHaveExited()
            }
            watching.source = source
            return source
        }
    }

    /// The connections to the child's standard streams.
    var streams: [LoopConnection] { [standardInput, standardOutput, standardError].compactMap { $0 } }

    /// The watching source, if there is one.
    var currentSource: LoopDescriptorSource? { watching.withLock { $0.source } }

    /// After a removal: a source left in no mode is dropped, so that it no longer keeps the
    /// process alive; adding the process again makes a new one.
    func sourceWasRemoved(from loop: Loop) {
        let dropped: LoopDescriptorSource? = watching.withLock { watching in
            guard let source = watching.source, loop.state.withLock({ _ in source.membership.isEmpty }) else {
                return nil
            }
            watching.source = nil
            return source
        }
        dropped?.invalidate()
    }

    /// Loop thread: the pidfd was readable. Reaps the child if it has exited and delivers that.
    fileprivate func childMayHaveExited(on loop: Loop) -> Bool {
        let mode = loop.currentMode ?? .default
        let outcome:
            (Result<Status, LoopError>, ((LoopProcess, Status) -> Void)?, [CheckedContinuation<Status, any Error>])? =
                state.withLock { state in
                    guard state.status == nil, state.failure == nil, state.pidfd >= 0,
                        let reaped = Platform.reap(state.pidfd)
                    else { return nil }
                    Platform.closeDescriptor(state.pidfd)
                    state.pidfd = -1
                    switch reaped {
                    case .success(let status):
                        state.status = status
                        state.deliveredOn = (loop, mode)
                    case .failure(let error):
                        state.failure = LoopError(
                            "process \(pid) was reaped by other code: \(error.message)", systemError: error.systemError)
                    }
                    defer {
                        state.handler = nil
                        state.waiters = [:]
                    }
                    return (reaped, state.handler, Array(state.waiters.values))
                }
        guard let (reaped, handler, waiters) = outcome else { return false }
        let source = watching.withLock { $0.source.take() }
        source?.invalidate()
        for waiter in waiters { waiter.resume(with: reaped.mapError { $0 as any Error }) }
        if case .success(let status) = reaped { handler?(self, status) }
        return true
    }

    /// The watching source's handler was released without the exit having been delivered: if
    /// its loop has ended, nothing will deliver the exit there, and the waiters learn so now.
    fileprivate func watchEnded(loop: Loop?) {
        guard loop.map(LoopProcess.hasEnded) ?? true else { return }
        let waiters = state.withLock { state in
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(throwing: loopEnded) }
    }

    private var loopEnded: LoopError {
        LoopError("the loop watching process \(pid) has ended before the process did; add it to another loop")
    }

    /// Whether `loop` has ended: it takes no more work.
    static func hasEnded(_ loop: Loop) -> Bool {
        loop.hasEnded
    }
}

/// What the watching source's handler holds: the process (so a process in a loop lives on when
/// its caller drops it) and, at its release, the news that the watch ended.
///
/// Its deinit runs when the source's handler is released, after the source's locks but possibly
/// while `LoopProcess.watching` is held (sources are made and added under it): it must not take
/// that lock.
private final class Watch {
    let process: LoopProcess
    weak var loop: Loop?
    var delivered = false

    init(_ process: LoopProcess, loop: Loop) {
        self.process = process
        self.loop = loop
    }

    func childMayHaveExited() {
        guard let loop else { return }
        if process.childMayHaveExited(on: loop) { delivered = true }
    }

    deinit {
        if !delivered { process.watchEnded(loop: loop) }
    }
}

/// An `onExit` handler queued on a loop after the exit: it runs on that loop's thread only.
private struct UncheckedHandler: @unchecked Sendable {
    let handler: (LoopProcess, LoopProcess.Status) -> Void
    init(_ handler: sending @escaping (LoopProcess, LoopProcess.Status) -> Void) { self.handler = handler }
}

extension Loop {
    /// Adds `process` to `mode` (`.common`: every common mode, now and later): its exit is
    /// delivered on this loop's thread while a mode holding it runs, and its `.connection`
    /// streams are served in that mode too.
    ///
    /// Any thread. Adding it again to a mode it is in does nothing, and so does adding a process
    /// whose exit was already delivered (its streams still join). Adding it to a loop that has
    /// ended does nothing, its streams included, and leaves it free for another loop. A process
    /// belongs to one loop: adding it to a second one is a programmer error.
    public func add(_ process: LoopProcess, forMode mode: Mode) {
        // Checked first: a stream that joined an ended loop would post its early calls there.
        guard !hasEnded else { return }
        for stream in process.streams where stream.descriptorSource.isValid {
            // Joined first: calls made before run ahead of anything the stream reads here.
            stream.join(self, inModes: [mode])
            add(stream, forMode: mode)
        }
        guard let source = process.watchSource(on: self) else { return }
        add(source, forMode: mode)
    }

    /// Removes `process` and its streams from `mode`; an exit that happens meanwhile waits for a
    /// mode holding it, and so does the streams' traffic.
    /// A process in no mode that is no longer referenced is released (see ``LoopProcess``).
    ///
    /// Any thread.
    public func remove(_ process: LoopProcess, forMode mode: Mode) {
        for stream in process.streams { remove(stream, forMode: mode) }
        guard let source = process.currentSource else { return }
        remove(source, forMode: mode)
        process.sourceWasRemoved(from: self)
    }

    /// Whether `process` is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ process: LoopProcess, inMode mode: Mode) -> Bool {
        guard let source = process.currentSource else { return false }
        return contains(source, inMode: mode)
    }
}
