/// Work queued for a loop by `perform`, by the executor or by a scheduled block whose time came:
/// one slot of a `BlockBuffer`.
///
/// 24 bytes: the body and, in the bytes its layout leaves free, the time it was posted. A block is
/// written on the posting thread's processor and read on the loop's, so each of its bytes crosses
/// between them; a block for modes other than the common ones is preceded by a slot holding them
/// (`modesOfNext`) instead of every block carrying a field for them: posts run 10–20 % faster
/// than with a 40-byte block that does, and posts for a named mode no slower
/// (`runloop-bench --only RunLoopKit --filter post`, eight alternating runs, medians).
struct LoopBlock {
    enum Body {
        case closure(@Sendable () -> Void)
        /// A Swift concurrency job: queued as is, no closure allocated per job.
        case job(UnownedJob)
        /// A scheduled block whose time has come (it runs unless cancelled first), in its handle's
        /// modes.
        case scheduled(LoopScheduled)
        /// The modes of the block in the next slot, which may run only in them (see
        /// `BlockBuffer.append(_:modes:)`); not a block itself.
        case modesOfNext([Loop.Mode])
        case taken
    }

    /// `.taken` once moved out to run.
    var body: Body
    /// The low 48 bits of the ticks at which the block was posted, while an instrument measures
    /// queue delay; 0 otherwise. Split so that both halves fit in the body's padding (a 48-bit
    /// stamp wraps after 78 hours, far beyond any queue delay).
    private var stampHigh: UInt16 = 0
    private var stampLow: UInt32 = 0

    private static let stampMask: UInt64 = (1 << 48) - 1

    init(_ body: consuming Body) {
        self.body = body
    }

    /// Moves the body out, leaving `.taken`: no retain or release of the closure's context.
    mutating func takeBody() -> Body {
        var body = Body.taken
        swap(&body, &self.body)
        return body
    }

    /// Records `ticks` as the time the block was posted.
    mutating func stamp(_ ticks: Ticks) {
        var low48 = UInt64(bitPattern: ticks) & LoopBlock.stampMask
        if low48 == 0 { low48 = 1 }  // 0 means "not stamped"; one nanosecond off
        stampHigh = UInt16(truncatingIfNeeded: low48 >> 32)
        stampLow = UInt32(truncatingIfNeeded: low48)
    }

    /// Whether `stamp` was called.
    var isStamped: Bool { stampHigh != 0 || stampLow != 0 }

    /// The ticks at which the block was posted, given the ticks `now` (later than the post by
    /// less than 78 hours); 0 if it was not stamped.
    func postedAt(now: Ticks) -> Ticks {
        guard isStamped else { return 0 }
        let low48 = UInt64(stampHigh) << 32 | UInt64(stampLow)
        let elapsed = (UInt64(bitPattern: now) &- low48) & LoopBlock.stampMask
        return now &- Ticks(elapsed)
    }

    /// Whether a block for `modes` (nil: the common modes) may run in `mode`; `modeIsCommon`:
    /// `mode` is in the common set (looked up once per pass, not per block).
    @inline(__always)
    static func mayRun(withModes modes: [Loop.Mode]?, in mode: Loop.Mode, modeIsCommon: Bool) -> Bool {
        guard let modes else { return modeIsCommon }
        for candidate in modes
        where candidate == mode || (modeIsCommon && candidate == .common) {
            return true
        }
        return false
    }
}
