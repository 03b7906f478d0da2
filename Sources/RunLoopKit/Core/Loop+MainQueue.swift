// The main dispatch queue on the main loop: drained in the common modes (step 2.5), as
// CoreFoundation drains it through libdispatch's main-queue eventfd.

extension Loop {
    /// Main loop, common mode: whether the main dispatch queue keeps the mode from being
    /// finished. It does once it has had work (a block, a `@MainActor` job), for good, as
    /// CoreFoundation's main-queue port does: more may come from any thread at any time. Until
    /// then the main loop empties like any other, so a program that never uses the main queue
    /// sees `.finished` when its last item goes. libdispatch makes the queue's eventfd at the first
    /// block and writes it, so a block queued before the loop first looked is seen here.
    func servesMainQueue(isCommon: Bool) -> Bool {
        guard isMainLoop, isCommon else { return false }
        if onThread.mainQueueInUse { return true }
        guard Platform.isMainThread, Platform.mainQueueHasWork else { return false }
        onThread.mainQueueInUse = true
        onThread.mainQueuePending = true
        return true
    }

    /// Main loop only: in a common mode and not already inside a drain.
    func mayDrainMainQueue(in mode: Mode) -> Bool {
        isMainLoop && !onThread.drainingMainQueue && withView(of: mode) { $0.isCommon }
    }

    /// Drains `DispatchQueue.main` (and so `@MainActor` jobs) if it signalled work and `mode` may
    /// serve it, as CoreFoundation does. Returns whether it ran.
    func drainMainQueue(in mode: Mode) -> Bool {
        guard onThread.mainQueuePending, mayDrainMainQueue(in: mode) else { return false }
        onThread.mainQueuePending = false
        onThread.drainingMainQueue = true
        callOut(.mainQueue) { Platform.drainMainQueue() }
        onThread.drainingMainQueue = false
        return true
    }
}
