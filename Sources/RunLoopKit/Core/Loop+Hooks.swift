// Hooks: work another part of the library adds to every pass of one loop, at fixed points of the
// iteration (docs/Design.md, "One run, step by step"), as libuv's prepare and check handles add
// work before and after its poll. The iteration knows the points, not what is hooked there: the
// sockets flush their gathered writes when a pass ends and before the loop sleeps without the
// iteration naming them. A loop with no hooks pays one comparison per point.

/// Work added to every pass of one loop (see `Loop.addHook(_:at:)`). Subclassed (`final`) by the
/// part of the library that adds it, which overrides the points it asked for. Loop thread only:
/// the loop calls its hooks on its own thread, and a hook may call out (to handlers that may run
/// the loop again: a nested run calls the hooks at its own passes' points).
class LoopHook {
    /// The points of a pass a hook is called at.
    struct Points: OptionSet {
        let rawValue: UInt8
        /// Before step 2.1, the pass's number already given (`Loop.passNumber`).
        static let passBegins = Points(rawValue: 1 << 0)
        /// After step 2.7, the pass's number still current.
        static let passEnds = Points(rawValue: 1 << 1)
        /// In step 2.4, each time the loop asks whether it may sleep (`readyToSleep`), before the
        /// posts are collected: work done here is seen by that check.
        static let beforeSleeping = Points(rawValue: 1 << 2)
    }

    func passBegins(_ loop: Loop) {}
    func passEnds(_ loop: Loop) {}
    func beforeSleeping(_ loop: Loop) {}
}

/// One loop's pass numbers and hooks: part of its `LoopThreadState`.
struct LoopHooks {
    /// The running pass's number, 0 outside any pass. A pass of a nested run has its own, and the
    /// outer pass's number comes back when it ends. 16 bits, wrapping past 0: a number is seen
    /// again 65,535 passes later.
    fileprivate(set) var pass: UInt16 = 0
    /// The last number given to a pass.
    private var lastPass: UInt16 = 0
    /// The points some hook is called at: what the iteration tests at each point (one byte, where
    /// a list's emptiness is two loads).
    fileprivate private(set) var points: LoopHook.Points = []
    /// The hooks, in the order they were added, kept for the loop's life (never removed, so an
    /// index into the lists below stays valid across a callout).
    private var owned: [LoopHook] = []
    /// The hooks of each point, in the order they were added, without a reference count of their
    /// own (`owned` holds them): calling one takes none.
    fileprivate private(set) var atPassBegin: [Unmanaged<LoopHook>] = []
    fileprivate private(set) var atPassEnd: [Unmanaged<LoopHook>] = []
    fileprivate private(set) var beforeSleeping: [Unmanaged<LoopHook>] = []

    /// Starts a pass: returns the number of the pass it interrupts (0 if none).
    @inline(__always)
    fileprivate mutating func beginPass() -> UInt16 {
        let outer = pass
        lastPass &+= 1
        if lastPass == 0 { lastPass = 1 }
        pass = lastPass
        return outer
    }

    fileprivate mutating func add(_ hook: LoopHook, at points: LoopHook.Points) {
        precondition(!owned.contains { $0 === hook }, "RunLoopKit: a hook is added to a loop once")
        owned.append(hook)
        self.points.formUnion(points)
        let unowned = Unmanaged.passUnretained(hook)
        if points.contains(.passBegins) { atPassBegin.append(unowned) }
        if points.contains(.passEnds) { atPassEnd.append(unowned) }
        if points.contains(.beforeSleeping) { beforeSleeping.append(unowned) }
    }

    /// How many hooks are called at `point` (one of the three).
    fileprivate func count(at point: LoopHook.Points) -> Int {
        switch point {
        case .passBegins: atPassBegin.count
        case .passEnds: atPassEnd.count
        default: beforeSleeping.count
        }
    }

    /// The hook called `index`th at `point`, read in place (the list is not copied).
    fileprivate func hook(_ index: Int, at point: LoopHook.Points) -> Unmanaged<LoopHook> {
        switch point {
        case .passBegins: atPassBegin[index]
        case .passEnds: atPassEnd[index]
        default: beforeSleeping[index]
        }
    }
}

extension Loop {
    /// Adds `hook` to this loop's passes at `points`, after the hooks added before it; it stays
    /// until the loop is deallocated. Loop thread only. Added during a pass, it is called from the
    /// next point on: at the end of the running pass (and of the passes a nested run interrupted)
    /// though it saw none of them begin. Adding a hook twice is a programmer error.
    func addHook(_ hook: LoopHook, at points: LoopHook.Points) {
        onThread.hooks.add(hook, at: points)
    }

    /// The running pass's number, 0 outside any pass (see `LoopHooks.pass`). Loop thread.
    var passNumber: UInt16 {
        @inline(__always) get { onThread.hooks.pass }
    }

    /// Starts a pass of the iteration: numbers it and calls the `passBegins` hooks. Returns the
    /// number of the pass it interrupts, for `endPass(resuming:)`. Loop thread.
    @inline(__always)
    func beginPass() -> UInt16 {
        let outer = onThread.hooks.beginPass()
        if onThread.hooks.points.contains(.passBegins) { callHooks(.passBegins) }
        return outer
    }

    /// Ends a pass: calls the `passEnds` hooks, then gives the interrupted pass its number back.
    @inline(__always)
    func endPass(resuming outer: UInt16) {
        if onThread.hooks.points.contains(.passEnds) { callHooks(.passEnds) }
        onThread.hooks.pass = outer
    }

    /// Calls the `beforeSleeping` hooks (step 2.4, `readyToSleep`). Loop thread.
    @inline(__always)
    func callHooksBeforeSleeping() {
        if onThread.hooks.points.contains(.beforeSleeping) { callHooks(.beforeSleeping) }
    }

    /// Calls the hooks of `point`, in the order they were added. The list is read afresh for each
    /// (a hook may add one: it is called from the next point on, so the count is taken first), and
    /// no loop-thread state is held across a hook, which may call out.
    @inline(never)
    private func callHooks(_ point: LoopHook.Points) {
        let count = onThread.hooks.count(at: point)
        var index = 0
        while index < count {
            let hook = onThread.hooks.hook(index, at: point)
            switch point {
            case .passBegins: hook._withUnsafeGuaranteedRef { $0.passBegins(self) }
            case .passEnds: hook._withUnsafeGuaranteedRef { $0.passEnds(self) }
            default: hook._withUnsafeGuaranteedRef { $0.beforeSleeping(self) }
            }
            index += 1
        }
    }
}
