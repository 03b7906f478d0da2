// Writes gathered per pass. The first write a connection makes in a pass of its loop, with
// nothing queued, goes to the socket at once (a reply or a request is not delayed); the writes
// that follow it in the same pass are only queued, and the connection waits on the loop's list of
// gathered writes, flushed with one `writev` when the pass ends, before the loop sleeps, or at
// once when the gathered bytes reach `gatherLimit`. Writes posted from other threads run as blocks
// of one pass, so a batch of them costs one flush too. A 64 KiB write per `send` cost a system
// call per write where the kernel's calls are dear: gathered, four such writes go in one call.
//
// The loop numbers its passes (`Loop.passNumber`: 0 outside any pass; a nested run's passes have
// their own) and calls the list's flush through its hooks (`Loop+Hooks.swift`); the list and the
// read scratch are the sockets' own state on the loop (`SocketsLoopState`).
//
// Outside a pass (before or between runs, in `entry` and `exit` observers) nothing is gathered:
// every write with nothing queued is sent at once, as there may be no later pass to flush it.

/// The sockets' state on one loop's thread: the scratch space its connections read into, and the
/// connections whose writes wait for the end of the pass. Made when a connection of the loop first
/// needs it and hung on the loop (`LoopThreadState.extensionState`) for its life; the first
/// gathered write adds it to the loop's hooks, called when each pass ends and before the loop
/// sleeps (a loop whose connections never gather pays for no hook). Loop thread only.
final class SocketsLoopState: LoopHook {
    /// Scratch space a connection reads into and copies out of before it calls out (so one buffer
    /// serves every connection of the loop, nested runs included). Not stack space:
    /// `withUnsafeTemporaryAllocation` of this size went to the heap, a `posix_memalign` and a
    /// `free` on every read (docs/performance-notes.md#a-connections-first-read).
    let readScratch = UnsafeMutableRawBufferPointer.allocate(
        byteCount: LoopConnection.firstReadSize, alignment: 16)
    /// The connections with writes to flush at the end of the pass, each once (with
    /// `ConnectionOutput.awaitsPassFlush` set); retained until flushed.
    @exclusivity(unchecked) private var pending: [LoopConnection] = []
    /// An empty array with capacity, swapped with `pending` to flush from, so that a pass that
    /// gathers allocates nothing.
    @exclusivity(unchecked) private var spare: [LoopConnection] = []
    /// Whether the loop calls this state's hooks (from the first gathered write on).
    @exclusivity(unchecked) private var hooked = false

    deinit { readScratch.deallocate() }

    /// Puts `connection` on the list flushed when the pass ends (once a pass: the caller checks
    /// and sets `awaitsPassFlush`).
    func gather(_ connection: LoopConnection, on loop: Loop) {
        if !hooked {
            hooked = true
            loop.addHook(self, at: [.passEnds, .beforeSleeping])
        }
        pending.append(connection)
    }

    override func passEnds(_ loop: Loop) { flush() }
    override func beforeSleeping(_ loop: Loop) { flush() }

    /// Flushes the connections with gathered writes, if any.
    @inline(__always)
    private func flush() {
        guard !pending.isEmpty else { return }
        flushPending()
    }

    @inline(never)
    private func flushPending() {
        // A flush may call out (`writable`, `closed`), and a handler may gather more: again
        // until none waits. Moved out first: the list is not held across a callout.
        while !pending.isEmpty {
            var flushing = spare
            spare = []
            swap(&flushing, &pending)
            for connection in flushing { connection.flushGatheredWrites() }
            flushing.removeAll(keepingCapacity: true)
            if spare.capacity < flushing.capacity { swap(&spare, &flushing) }
        }
    }
}

extension Loop {
    /// The sockets' state on this loop, made at first use. Loop thread.
    var socketsState: SocketsLoopState {
        if let state = onThread.extensionState { return unsafeDowncast(state, to: SocketsLoopState.self) }
        let state = SocketsLoopState()
        onThread.extensionState = state
        return state
    }

    /// The loop's scratch space for connections' reads (see `SocketsLoopState.readScratch`).
    /// Loop thread.
    var readScratch: UnsafeMutableRawBufferPointer { socketsState.readScratch }
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
    /// the TLS records). Pass numbers are 16 bits (`ConnectionOutput.directSendPass`): one seen
    /// again 65,535 passes later only gathers a write that could have gone at once, into the same
    /// pass's flush.
    @inline(__always)
    func writeRoute() -> WriteRoute {
        guard queuedBytes == 0 && !isConnecting else { return .queue }
        let pass = boundLoop.load(ordering: .relaxed)!._withUnsafeGuaranteedRef { $0.passNumber }
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
            boundLoop.load(ordering: .relaxed)!._withUnsafeGuaranteedRef { $0.socketsState.gather(self, on: $0) }
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
