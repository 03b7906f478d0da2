/// Work queued for a loop by `perform`, by the executor or by a scheduled block whose time came,
/// with the modes it may run in.
struct LoopBlock {
    enum Body {
        case closure(@Sendable () -> Void)
        /// A Swift concurrency job: queued as is, no closure allocated per job.
        case job(UnownedJob)
        /// A scheduled block whose time has come (it runs unless cancelled first).
        case scheduled(LoopScheduled)
        case taken
    }

    /// The modes it may run in; nil for the common modes, the usual case, which then costs no
    /// array and no reference count shared by every posting thread.
    let modes: [Loop.Mode]?
    /// `.taken` once moved out to run.
    var body: Body
    /// When it was posted, while an instrument measures queue delay; 0 otherwise.
    var postedAt: Ticks = 0

    init(modes: [Loop.Mode]?, body: consuming Body) {
        self.modes = modes?.count == 1 && modes?[0] == .common ? nil : modes
        self.body = body
    }

    /// Moves the body out, leaving `.taken`: no retain or release of the closure's context.
    mutating func takeBody() -> Body {
        var body = Body.taken
        swap(&body, &self.body)
        return body
    }

    /// Whether the block may run in `mode`; `modeIsCommon`: `mode` is in the common set (looked up
    /// once per pass, not per block).
    @inline(__always)
    func mayRun(in mode: Loop.Mode, modeIsCommon: Bool) -> Bool {
        guard let modes else { return modeIsCommon }
        for candidate in modes
        where candidate == mode || (modeIsCommon && candidate == .common) {
            return true
        }
        return false
    }
}
