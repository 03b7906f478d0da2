import Glibc
import RunLoopKit
import Synchronization

/// The process: the workers and their listeners, signal handling on the main thread's loop.
final class Server {
    /// How long requests under way get after SIGINT/SIGTERM before the process exits anyway.
    static let drainGrace: Duration = .seconds(10)

    let options: ServerOptions
    private let mainLoop = Loop.current
    /// One per worker: signalled on the first SIGINT/SIGTERM, it drains its worker.
    private var drainSources: [LoopSource] = []
    private var stopping = false

    init(options: ServerOptions) {
        self.options = options
    }

    /// Runs until SIGINT or SIGTERM and the drain that follows; returns the exit status.
    func run() -> Int32 {
        Server.raiseDescriptorLimit()
        Server.unblockStopSignals()
        let group = LoopGroup(threads: options.threads, name: "httpd")
        let shared = ServerShared(options: options)
        let remaining = DrainCounter(workers: options.threads)
        let mainLoop = self.mainLoop
        // One listener per loop. With port 0 the first bind picks the port and the others share it.
        var port = options.port
        do {
            let tls = try options.tlsConfiguration()
            for loop in group.loops {
                let worker = LoopBound(Worker(loop: loop, shared: shared), on: loop)
                let listener = try Worker.listen(worker, on: SocketAddress(ipv4: options.host, port: port), tls: tls)
                port = listener.localAddress.port ?? 0
                let drain = LoopSource {
                    // No more accepting; the listener lets its worker go.
                    listener.invalidate()
                    worker.value.drain(until: .now + Server.drainGrace)
                    if remaining.finishOne() { mainLoop.stop() }
                }
                loop.add(drain, forMode: .default)
                drainSources.append(drain)
            }
        } catch {
            printError("runloop-httpd: \(error)\n")
            return 1
        }
        let signals = [SIGINT, SIGTERM].map { number in
            LoopSignalSource(signal: number, mainLoop.isolated { [unowned self] _ in self.signalReceived() })
        }
        for source in signals { mainLoop.add(source, forMode: .default) }
        let scheme = options.tlsCertificate == nil ? "" : ", HTTPS"
        print("listening on \(options.host):\(port) (\(options.threads) threads\(scheme))")
        fflush(nil)

        mainLoop.run()

        for source in signals { source.invalidate() }
        group.shutdown()
        print("stopped")
        fflush(nil)
        return 0
    }

    /// First signal: drain. A second one: exit at once.
    private func signalReceived() {
        guard !stopping else {
            printError("runloop-httpd: second signal, exiting now\n")
            exit(0)
        }
        stopping = true
        for source in drainSources { source.signal() }
        // The workers' drains end by this time too; this only guards against a stuck one.
        let mainLoop = self.mainLoop
        let grace = LoopTimer(after: Server.drainGrace + .seconds(1)) { _ in mainLoop.stop() }
        mainLoop.add(grace, forMode: .default)
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

    /// Raises the soft limit on open descriptors to the hard limit, so `--max-connections` is not
    /// capped by the default of 1024.
    private static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
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
