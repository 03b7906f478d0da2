import Synchronization

/// A fixed set of `LoopThread`s for a server: one loop per thread, handed out round-robin.
///
/// Typical use: one listening socket per loop (`SO_REUSEPORT`), or accept on one loop and hand
/// each connection to `next()`.
public final class LoopGroup: Sendable {
    /// The group's loops, one per thread, in thread order.
    ///
    /// Any thread.
    public let loops: [Loop]
    private let threads: [LoopThread]
    private let cursor = Atomic<UInt>(0)

    /// Starts `threads` loop threads named `name-0`, `name-1`, ….
    ///
    /// Any thread. `threads` must be at least 1. Stops the process if a loop cannot be created
    /// (the process has run out of file descriptors, say); ``start(threads:name:)`` throws
    /// instead.
    public init(threads: Int, name: String) {
        LoopGroup.checkCount(threads)
        self.threads = (0..<threads).map { LoopThread(name: "\(name)-\($0)") }
        self.loops = self.threads.map(\.loop)
    }

    /// Starts `threads` loop threads named `name-0`, `name-1`, …, as ``init(threads:name:)``
    /// does, but throws where that stops the process.
    ///
    /// Any thread. `threads` must be at least 1. Each thread is started with
    /// ``LoopThread/start(name:)``: when one cannot be (the process has run out of descriptors,
    /// `systemError` `EMFILE` or `ENFILE`), the threads already started are stopped and joined and
    /// their descriptors closed before its `LoopError` is thrown, so nothing of the group is left.
    public static func start(threads: Int, name: String) throws(LoopError) -> LoopGroup {
        checkCount(threads)
        var started: [LoopThread] = []
        for index in 0..<threads {
            do {
                started.append(try LoopThread.start(name: "\(name)-\(index)"))
            } catch {
                stop(started)
                throw error
            }
        }
        return LoopGroup(started: started)
    }

    private init(started threads: [LoopThread]) {
        self.threads = threads
        self.loops = threads.map(\.loop)
    }

    private static func checkCount(_ threads: Int) {
        precondition(threads >= 1, "RunLoopKit: a LoopGroup needs at least one thread (got \(threads))")
    }

    /// The next loop, round-robin.
    ///
    /// Any thread.
    public func next() -> Loop {
        let index = cursor.add(1, ordering: .relaxed).oldValue
        return loops[Int(index % UInt(loops.count))]
    }

    /// Stops every loop and joins every thread (blocks posted before still run).
    ///
    /// Any thread but the group's own; idempotent.
    public func shutdown() {
        LoopGroup.stop(threads)
    }

    /// Stops `threads` and joins them. Asks all first, then joins: they wind down in parallel.
    private static func stop(_ threads: [LoopThread]) {
        for thread in threads {
            thread.requestStop()
        }
        for thread in threads {
            thread.stop()
        }
    }
}
