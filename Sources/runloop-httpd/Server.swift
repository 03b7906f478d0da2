import Glibc
import RunLoopKit
import Synchronization

/// The process: listeners, the loop group, signal handling on the main thread's loop.
final class Server {
    /// How long in-flight responses get after SIGINT/SIGTERM before the process exits anyway.
    static let drainGrace: Duration = .seconds(10)

    let options: ServerOptions
    private let mainLoop = Loop.current
    private var group: LoopGroup?
    private var slots: [WorkerSlot] = []
    private var stopping = false

    init(options: ServerOptions) {
        self.options = options
    }

    /// Runs until SIGINT or SIGTERM and the drain that follows; returns the exit status.
    func run() -> Int32 {
        Socket.raiseDescriptorLimit()
        Server.unblockStopSignals()
        // One listener per loop. With port 0 the first bind picks the port and the others share it.
        var listeners: [Int32] = []
        var port = options.port
        do {
            for _ in 0..<options.threads {
                let fd = try Socket.listen(host: options.host, port: port)
                if port == 0 { port = Socket.localPort(fd) }
                listeners.append(fd)
            }
        } catch {
            printError("runloop-httpd: \(error)\n")
            return 1
        }

        let signals = [SIGINT, SIGTERM].map { number in
            LoopSignalSource(signal: number) { [unowned self] received in self.signalReceived(received) }
        }
        for source in signals { mainLoop.add(source, forMode: .default) }

        let shared = ServerShared(options: options)
        let group = LoopGroup(threads: options.threads, name: "httpd")
        self.group = group
        let startup = Atomic<Int>(0)
        for (loop, listener) in zip(group.loops, listeners) {
            let slot = WorkerSlot()
            slots.append(slot)
            loop.perform {
                let worker = Worker(loop: loop, listener: listener, shared: shared)
                do {
                    try worker.start()
                    slot.worker = worker
                } catch {
                    printError("runloop-httpd: cannot watch the listener: \(error)\n")
                    startup.add(1, ordering: .relaxed)
                }
            }
        }
        print("listening on \(options.host):\(port) (\(options.threads) threads)")
        fflush(nil)

        mainLoop.run()

        for source in signals { source.invalidate() }
        group.shutdown()
        print("stopped")
        fflush(nil)
        return startup.load(ordering: .relaxed) == 0 ? 0 : 1
    }

    /// A process inherits its parent's signal mask: one started from a thread that blocks SIGINT and
    /// SIGTERM (a Dispatch or Swift-concurrency worker, for example) would never receive them.
    /// Unblock them here, before the loop threads start (they inherit this thread's mask).
    private static func unblockStopSignals() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }

    /// First signal: drain. A second one: exit at once.
    private func signalReceived(_ signal: Int32) {
        guard !stopping else {
            printError("runloop-httpd: second signal, exiting now\n")
            exit(0)
        }
        stopping = true
        guard let group else {
            mainLoop.stop()
            return
        }
        let mainLoop = self.mainLoop
        let remaining = DrainCounter(workers: group.loops.count)
        for (loop, slot) in zip(group.loops, slots) {
            loop.perform {
                guard let worker = slot.worker else {
                    if remaining.finishOne() { mainLoop.stop() }
                    return
                }
                worker.beginDrain {
                    if remaining.finishOne() { mainLoop.stop() }
                }
            }
        }
        let grace = LoopTimer(after: Server.drainGrace) { _ in mainLoop.stop() }
        mainLoop.add(grace, forMode: .default)
    }
}

/// Counts the workers still draining.
final class DrainCounter: Sendable {
    private let remaining: Atomic<Int>

    init(workers: Int) {
        remaining = Atomic(workers)
    }

    /// Returns true for the last one.
    func finishOne() -> Bool {
        remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
    }
}
