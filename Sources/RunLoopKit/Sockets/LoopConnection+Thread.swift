// A connection's hop to its loop's thread, and a child's stream's calls made before it has a loop.

extension LoopConnection {
    /// What few connections have: a child's stream's early calls, a TLS connection's filter. Set
    /// once, at the first need (in `init` for a child's stream), and never replaced (`extrasSlot`).
    /// Any thread.
    final class Extras: Sendable {
        /// A child's stream only: the calls made before it had a loop, applied there once it has one.
        let early: Locked<EarlyCalls>?
        /// The TLS filter over the socket: set once, on the loop's thread, when the connection
        /// starts TLS (`LoopConnection+TLS.swift`).
        let filter = OnceReference<TLSTransport>()

        init(early: Locked<EarlyCalls>?) { self.early = early }
    }

    struct EarlyCalls {
        var calls: [@Sendable (LoopConnection) -> Void] = []
        /// The calls were handed to the loop: later ones go to it directly.
        var handedOver = false
    }

    /// The extras, made now if they were not.
    func makeExtras() -> Extras {
        if let extras = extrasSlot.load() { return extras }
        return extrasSlot.storeIfNil(Extras(early: nil))
    }

    private var early: Locked<EarlyCalls>? { extrasSlot.load()?.early }

    /// Whether the calling thread is the connection's loop's thread, and calls may go to the loop
    /// directly (not for a child's stream whose process is in no loop yet, or whose early calls
    /// are being handed over). Takes no reference to the loop: retaining and releasing a loop,
    /// which weak references give a side table, went the runtime's slow way on every write
    /// (docs/performance-notes.md#instructions-per-request).
    var isOnLoopThread: Bool {
        if let early, !early.withLock({ $0.handedOver }) { return false }
        guard let loop = boundLoop.load(ordering: .acquiring) else { return false }
        return loop._withUnsafeGuaranteedRef { $0.isCurrentThread }
    }

    /// Runs `body` on the loop's thread: now if this is it, else posted in the connection's modes
    /// (which keeps each calling thread's order). Before a child's stream has a loop, `body` waits
    /// for the one it joins.
    func onLoop(_ body: @escaping @Sendable (LoopConnection) -> Void) {
        let loop: Loop
        if let early {
            guard
                let ready = early.withLock({ calls -> Loop? in
                    guard calls.handedOver else {
                        calls.calls.append(body)
                        return nil
                    }
                    return self.loop
                })
            else { return }
            loop = ready
        } else {
            loop = self.loop
        }
        if loop.isCurrentThread {
            body(self)
        } else {
            hop(to: loop) { body(self) }
        }
    }

    /// A child's stream joins `loop`: the calls made so far are posted there in `modes`, in their
    /// order, before any later one. Once; a later call does nothing (a second loop is refused when
    /// the connection is added to it).
    func join(_ loop: Loop, inModes modes: [Loop.Mode]) {
        guard let early else { return }
        early.withLock { calls in
            guard !calls.handedOver else { return }
            // Stored first: the posted calls may run on the loop's thread before this returns.
            boundLoop.store(Unmanaged.passRetained(loop), ordering: .releasing)
            // Later calls are posted in the same modes as these, before the add records them.
            withResidency { residency in
                if residency.modes.isEmpty { residency.modes = modes }
            }
            for call in calls.calls { loop.perform(inModes: modes) { call(self) } }
            calls.calls = []
            calls.handedOver = true
        }
    }
}
