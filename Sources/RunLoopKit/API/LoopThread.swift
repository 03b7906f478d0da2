import Dispatch
import Glibc
import Synchronization

/// A named thread running its own loop in `.default` until ``shutdown()``: the background
/// run-loop thread of iOS code (a thread that adds a `Port()` and runs forever), done right.
///
/// The loop needs no `Port()` to stay alive: the thread keeps it running even when `.default` is
/// empty (without spinning), and a `Loop.stop()` by user code only ends the current run. Hand it
/// work with `loop.perform`, or add timers and sources to `loop` from any thread.
public final class LoopThread: @unchecked Sendable {
    /// The thread's loop. Available as soon as `init` returns.
    ///
    /// Any thread may use its thread-safe members; only this thread runs it.
    public let loop: Loop
    /// The thread's name (the kernel keeps its first 15 bytes).
    ///
    /// Any thread.
    public let name: String

    private let control: Control
    private let joined = Locked(false)

    /// What the thread and its owner share.
    private final class Control: Sendable {
        let name: String
        let stopRequested = Atomic<Bool>(false)
        let started = DispatchSemaphore(value: 0)
        /// The thread's loop, or why it could not be created; set before `started` is signalled.
        let outcome = Locked<Result<Loop, LoopError>?>(nil)
        let thread = Locked<Platform.Thread>(0)
        init(name: String) { self.name = name }
    }

    /// Starts a thread named `name` and waits until its loop exists, its descriptors open.
    ///
    /// Any thread. Stops the process if the loop cannot be created (the process has run out of
    /// file descriptors, say); ``start(name:)`` throws instead.
    public init(name: String) {
        let started: (control: Control, loop: Loop)
        do {
            started = try LoopThread.launch(name: name)
        } catch {
            Loop.cannotCreate(error)
        }
        self.name = name
        self.control = started.control
        self.loop = started.loop
    }

    /// Starts a thread named `name` and waits until its loop exists, its descriptors open, as
    /// ``init(name:)`` does, but throws where that stops the process.
    ///
    /// Any thread. The loop's five descriptors (a wake-up eventfd, libevent's epoll and signal
    /// pipe, and a timerfd) are opened before this returns; when the process has run out of them this throws a
    /// `LoopError` whose `systemError` is `EMFILE` (the process's limit, `ulimit -n`) or `ENFILE`
    /// (the system's), as libuv's `uv_loop_init` returns `UV_EMFILE`. A thread the system refuses
    /// throws with `pthread_create`'s error (`EAGAIN`). Either way the descriptors opened are
    /// closed and the thread has exited when it throws, so a later call can succeed once
    /// descriptors are free again.
    public static func start(name: String) throws(LoopError) -> LoopThread {
        let started = try launch(name: name)
        return LoopThread(name: name, control: started.control, loop: started.loop)
    }

    private init(name: String, control: Control, loop: Loop) {
        self.name = name
        self.control = control
        self.loop = loop
    }

    /// Creates the thread and waits for its loop. Throws, once the thread has exited and its loop
    /// has gone, if the loop could not be created, or if the thread could not.
    private static func launch(name: String) throws(LoopError) -> (control: Control, loop: Loop) {
        let control = Control(name: name)
        let thread = try Platform.startThread { LoopThread.main(control) }
            .get(failing: "pthread_create for LoopThread \"\(name)\"")
        control.thread.withLock { $0 = thread }
        control.started.wait()
        switch control.outcome.withLock({ $0! }) {
        case .success(let loop):
            return (control, loop)
        case .failure(let error):
            // Joined before throwing: the thread's teardown closes the eventfd it may have opened.
            Platform.joinThread(thread)
            throw error
        }
    }

    deinit {
        stop()
    }

    /// Stops the loop and, unless called on the thread itself, waits for the thread to exit.
    ///
    /// Any thread; idempotent. Blocks posted before `stop()` still run (the stop request is queued
    /// behind them, and the thread makes a last non-blocking pass before it exits). Once `stop()`
    /// has returned the loop has ended (``Loop/hasEnded``): `perform` returns false and releases
    /// the block unrun, `submit` throws a `LoopError`, adding an item does nothing. Called on the
    /// loop's own thread it returns at once and the thread exits when the current callout returns.
    /// ``shutdown()`` is the same call, named as `LoopGroup` and `LoopWorkPool` name ending for good.
    public func stop() {
        requestStop()
        let thread = control.thread.withLock { $0 }
        let first = joined.withLock { joined in
            defer { joined = true }
            return !joined
        }
        guard first else { return }
        if loop.isCurrentThread {
            // Cannot join itself: let the thread's resources go when it exits.
            Platform.detachThread(thread)
        } else {
            Platform.joinThread(thread)
        }
    }

    /// Ends the thread for good: the blocks already posted run, then the loop ends (every run on
    /// its stack returns, its `exit` observers run, its items are released) and the thread exits.
    /// The same as ``stop()``, under the name `LoopGroup.shutdown()` and `LoopWorkPool.shutdown()`
    /// give ending for good; `Loop.stop()` ends only the current run of a loop.
    ///
    /// Any thread; idempotent, whichever of `shutdown()` and `stop()` came first. Unless called on
    /// the thread itself, it returns once the thread has exited; the loop has ended then
    /// (``Loop/hasEnded``): `perform` returns false and releases the block unrun, `submit` throws
    /// a `LoopError`, adding an item does nothing. Called on the loop's own thread it returns at
    /// once, and the thread exits when the current callout returns.
    public func shutdown() {
        stop()
    }

    /// The longest prefix of `name` that fits the kernel's 15 bytes without splitting a character.
    static func kernelName(_ name: String) -> String {
        var result = ""
        for character in name {
            guard result.utf8.count + character.utf8.count <= 15 else { break }
            result.append(character)
        }
        return result
    }

    /// Asks the thread to stop without waiting for it. Any thread; idempotent.
    func requestStop() {
        guard !control.stopRequested.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Queued rather than a bare loop.stop(): it is delivered even if the thread has not entered
        // its run yet, and only after the blocks posted before it. Every run on the stack stops, so
        // a nested run inside user code cannot keep the thread alive.
        loop.perform { Loop.current.stopAllRuns() }
    }

    private static func main(_ control: Control) {
        Platform.setCurrentThreadName(LoopThread.kernelName(control.name))
        // Every descriptor of the loop is opened before `init` returns: a caller that then uses up
        // the process's descriptors does not leave the loop unable to start, and one that has
        // used them up already is told so by `start(name:)`.
        let loop: Loop
        do {
            loop = try Loop.startCurrent()
        } catch {
            control.outcome.withLock { $0 = .failure(error) }
            control.started.signal()
            return
        }
        // Keeps `.default` alive so the run sleeps instead of finishing when there is nothing to do.
        let keepAlive = LoopSource {}
        loop.add(keepAlive, forMode: .default)
        control.outcome.withLock { $0 = .success(loop) }
        control.started.signal()
        while !control.stopRequested.load(ordering: .acquiring) {
            loop.run(mode: .default, for: .seconds(Int64.max))
        }
        // Ended first, so that nothing is accepted after the last pass: then a last pass for the
        // blocks that raced with the stop request.
        loop.end()
        loop.run(mode: .default, for: .zero)
        keepAlive.invalidate()
    }
}
