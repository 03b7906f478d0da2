/// Nanoseconds of the continuous clock since its epoch (`ContinuousClock().systemEpoch`: on Linux
/// the boot, `CLOCK_BOOTTIME`, whose reading `ContinuousClock.now` is): heap keys are plain
/// integers, because `ContinuousClock.Instant` is a resilient type and every copy of it goes
/// through witness tables.
typealias Ticks = Int64

enum TickClock {
    /// The instant of tick 0.
    static let origin = ContinuousClock().systemEpoch

    static func ticks(_ instant: ContinuousClock.Instant) -> Ticks {
        ticks(offset: instant - origin)
    }

    /// The ticks of the instant `offset` after `origin`.
    static func ticks(offset: Duration) -> Ticks {
        // One 128-bit division by a constant (`components` would divide twice).
        let attoseconds = offset.attoseconds
        // ±285 years fit; beyond that, saturate (such timers never fire in practice anyway). The
        // bounds are literals: `Int128` arithmetic on them would be calls at run time.
        guard attoseconds > -9_000_000_000_000_000_000_000_000_000,
            attoseconds < 9_000_000_000_000_000_000_000_000_000
        else { return attoseconds < 0 ? .min / 2 : .max / 2 }
        return Ticks(attoseconds / 1_000_000_000)
    }

    /// The clock read directly, in the same units as `ticks(_:)` of `ContinuousClock.now` (the
    /// same clock, the same epoch): no resilient `Instant`, no subtraction of instants and no
    /// 128-bit division. A busy loop's pass reads the clock for its deadline
    /// (docs/performance-notes.md#instructions-per-pass).
    static var now: Ticks { Platform.continuousClockNanoseconds() }

    static func instant(_ ticks: Ticks) -> ContinuousClock.Instant {
        origin + .nanoseconds(ticks)
    }
}

extension Ticks {
    /// `self + other`, clamped to the representable range instead of trapping.
    func addingSaturating(_ other: Ticks) -> Ticks {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }
}

extension Duration {
    /// Whole nanoseconds, negative durations counting as zero and huge ones clamped to `Int64.max`.
    var saturatingNanoseconds: Int64 {
        // One 128-bit division by a constant, and none for zero (the usual tolerance): `components`
        // divides twice and multiplies with overflow checks, on each `schedule(after:)`
        // (docs/performance-notes.md#instructions-per-scheduled-block).
        let attoseconds = attoseconds
        guard attoseconds > 0 else { return 0 }
        // `Int64.max` nanoseconds, as a literal: an `Int128` product is a call at run time.
        guard attoseconds < 9_223_372_036_854_775_807_000_000_000 else { return .max }
        return Int64(attoseconds / 1_000_000_000)
    }
}
