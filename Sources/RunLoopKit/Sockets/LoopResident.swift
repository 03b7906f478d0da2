// What every item a loop holds through a descriptor source shares: listeners, connections (a
// child's standard streams among them) and datagram sockets. Its residency (loop, modes, timer)
// under the item's lock; the one way onto its loop's thread (`hop`); leaving the loop. Adding to
// and removing from a loop, with the ended-loop rule, is `Loop+Sockets.swift`; the delivery guard
// `DeliveryGuard.swift`; a listener's and datagram socket's lifecycle `ResidentLifecycle.swift`.

/// Where a listener, connection or datagram socket lives: its loop, the modes it was added to (as given, `.common`
/// included: connections it accepts and blocks it posts go to the same) and its timer.
struct Residency {
    var loop: Loop?
    var modes: [Loop.Mode] = []
    /// Follows the item into and out of its modes (idle, connect and back-off deadlines).
    var timer: LoopTimer?

    /// The modes blocks for the item are posted in: its own, or the common set before it has any.
    var postingModes: [Loop.Mode] { modes.isEmpty ? [.common] : modes }
}

/// A listener, a connection or a datagram socket: an item a loop holds through its descriptor source.
protocol LoopResident: DescriptorClient, Sendable {
    /// Runs `body` on the residency under the item's lock. Any thread; `body` must not call back
    /// into the item.
    func withResidency<R>(_ body: (inout Residency) -> R) -> R
    var descriptorSource: LoopDescriptorSource { get }
}

extension LoopResident {
    /// Drops the reference that kept the item alive in its loop, outside the lock; the caller
    /// must still hold the item.
    func leaveLoop() {
        let timer = withResidency { residency in
            defer { residency.timer = nil }
            return residency.timer
        }
        timer?.invalidate()
        let released = descriptorSource.letGo()
        withExtendedLifetime(released) {}
    }

    /// The modes blocks for the item are posted in.
    var postingModes: [Loop.Mode] { withResidency { $0.postingModes } }

    /// The item's hop to its loop's thread: posts `body` to `loop` (the item's loop) in the
    /// item's modes, which keeps each calling thread's order and waits while no mode holding the
    /// item runs. Returns false, with `body` released unrun, when the loop has ended. Any thread;
    /// callers on the loop's thread that may act at once check `isCurrentThread` first (no
    /// closure is made then, as a connection's async reads and writes need).
    @discardableResult
    func hop(to loop: Loop, _ body: @escaping @Sendable () -> Void) -> Bool {
        loop.perform(inModes: postingModes, body)
    }
}
