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
    /// Any thread. `threads` must be at least 1.
    public init(threads: Int, name: String) {
        precondition(threads >= 1, "RunLoopKit: a LoopGroup needs at least one thread (got \(threads))")
        self.threads = (0..<threads).map { LoopThread(name: "\(name)-\($0)") }
        self.loops = self.threads.map(\.loop)
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
        // Ask all first, then join: the threads wind down in parallel.
        for thread in threads {
            thread.requestStop()
        }
        for thread in threads {
            thread.stop()
        }
    }
}
