// Writes gathered per pass. The first write a connection makes in a pass of its loop, with
// nothing queued, goes to the socket at once (a reply or a request is not delayed); the writes
// that follow it in the same pass are only queued, and the connection waits on the loop's list of
// gathered writes, flushed with one `writev` when the pass ends, before the loop sleeps, or at
// once when the gathered bytes reach `gatherLimit`. Writes posted from other threads run as blocks
// of one pass, so a batch of them costs one flush too. A 64 KiB write per `send` cost a system
// call per write where the kernel's calls are dear: gathered, four such writes go in one call.
//
// Outside a pass (before or between runs, in `entry` and `exit` observers) nothing is gathered:
// every write with nothing queued is sent at once, as there may be no later pass to flush it.

/// A loop's gathered writes: which pass is running, and the connections whose writes wait for its
/// end. Loop thread only (part of `LoopThreadState`).
struct GatheredWrites {
    /// The running pass's number, 0 outside any pass. A connection that sent at once records it
    /// (`ConnectionOutput.directSendPass`); a pass of a nested run has its own, and the outer
    /// pass's number comes back when it ends. 16 bits: a number seen again 65,535 passes later
    /// only gathers one write that could have gone at once, into the same pass's flush.
    var pass: UInt16 = 0
    /// The last number given to a pass.
    private var lastPass: UInt16 = 0
    /// The connections with writes to flush at the end of the pass, each once (with
    /// `ConnectionOutput.awaitsPassFlush` set); retained until flushed.
    var pending: [LoopConnection] = []
    /// An empty array with capacity, swapped with `pending` to flush from, so that a pass that
    /// gathers allocates nothing.
    private var spare: [LoopConnection] = []

    /// Starts a pass: returns the number of the pass it interrupts (0 if none).
    @inline(__always)
    mutating func beginPass() -> UInt16 {
        let outer = pass
        lastPass &+= 1
        if lastPass == 0 { lastPass = 1 }
        pass = lastPass
        return outer
    }

    /// The pending connections, leaving the list empty (with the spare's capacity).
    mutating func takePending() -> [LoopConnection] {
        var taken = spare
        spare = []
        swap(&taken, &pending)
        return taken
    }

    /// Keeps a flushed list's capacity for the next pass (emptied here).
    mutating func keepSpare(_ flushed: inout [LoopConnection]) {
        flushed.removeAll(keepingCapacity: true)
        if spare.capacity < flushed.capacity { swap(&spare, &flushed) }
    }
}

extension Loop {
    /// Runs one pass of the iteration, with writes gathered: those that wait are flushed when the
    /// pass ends. Loop thread.
    @inline(__always)
    func gatheringWrites<R>(_ pass: () -> R) -> R {
        let outer = onThread.gatheredWrites.beginPass()
        let result = pass()
        flushGatheredWrites()
        onThread.gatheredWrites.pass = outer
        return result
    }

    /// Flushes the connections with gathered writes, if any: at the end of a pass and before the
    /// loop sleeps. Loop thread.
    @inline(__always)
    func flushGatheredWrites() {
        guard !onThread.gatheredWrites.pending.isEmpty else { return }
        flushPendingWrites()
    }

    @inline(never)
    private func flushPendingWrites() {
        // A flush may call out (`writable`, `closed`), and a handler may gather more: again
        // until none waits. Moved out first: the list is loop-thread state, not held across a
        // callout.
        while !onThread.gatheredWrites.pending.isEmpty {
            var flushing = onThread.gatheredWrites.takePending()
            for connection in flushing { connection.flushGatheredWrites() }
            onThread.gatheredWrites.keepSpare(&flushing)
        }
    }
}

extension LoopConnection {
    /// The most bytes gathered before they are sent without waiting for the end of the pass: a
    /// handler that writes a lot in one callout keeps the socket busy meanwhile (and no more is
    /// held than a `writev` of 64 blocks sends).
    static let gatherLimit = 256 * 1024

    /// What a write does with its bytes (loop thread).
    enum WriteRoute {
        /// Nothing is queued and this is the connection's first write of the pass (or there is
        /// no pass): to the socket at once.
        case send
        /// Nothing is queued and the connection already sent in this pass: queued until the end
        /// of the pass, with the others written meanwhile.
        case gather
        /// Bytes are queued: behind them.
        case queue
    }

    /// Where a write goes now. Loop thread; for a write the connection takes (open, plaintext or
    /// the TLS records).
    @inline(__always)
    func writeRoute() -> WriteRoute {
        guard queuedBytes == 0 && !isConnecting else { return .queue }
        let pass = boundLoop.load(ordering: .relaxed)!._withUnsafeGuaranteedRef {
            $0.onThread.gatheredWrites.pass
        }
        if pass == 0 || output.directSendPass != pass {
            output.directSendPass = pass
            return .send
        }
        return .gather
    }

    /// After bytes were queued by `route`: a gathered write puts the connection on its loop's list
    /// (once a pass), and gathered bytes past `gatherLimit` are sent now.
    @inline(__always)
    func didQueue(_ route: WriteRoute) {
        if route == .gather && !output.awaitsPassFlush {
            output.awaitsPassFlush = true
            boundLoop.load(ordering: .relaxed)!._withUnsafeGuaranteedRef {
                $0.onThread.gatheredWrites.pending.append(self)
            }
        }
        guard output.awaitsPassFlush && queuedBytes >= LoopConnection.gatherLimit else { return }
        guard sendQueued() else { return }
        // The socket did not take it all: the rest waits for it to turn writable, not for the
        // end of the pass.
        if queuedBytes > 0 { output.awaitsPassFlush = false }
    }

    /// The end of the pass (or the loop is about to sleep): what was gathered goes out.
    func flushGatheredWrites() {
        assertOnLoopThread()
        guard output.awaitsPassFlush else { return }
        output.awaitsPassFlush = false
        flush()
    }
}
