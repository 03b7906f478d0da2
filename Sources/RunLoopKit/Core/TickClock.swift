/// Nanoseconds since a process-wide origin: heap keys are plain integers, because
/// `ContinuousClock.Instant` is a resilient type and every copy of it goes through witness tables.
typealias Ticks = Int64

enum TickClock {
    static let origin = ContinuousClock.now

    static func ticks(_ instant: ContinuousClock.Instant) -> Ticks {
        ticks(offset: instant - origin)
    }

    /// The ticks of the instant `offset` after `origin`.
    static func ticks(offset: Duration) -> Ticks {
        // One 128-bit division by a constant (`components` would divide twice).
        let attoseconds = offset.attoseconds
        // ±285 years fit; beyond that, saturate (such timers never fire in practice anyway).
        let limit: Int128 = 9_000_000_000 * 1_000_000_000_000_000_000
        guard attoseconds > -limit, attoseconds < limit else { return attoseconds < 0 ? .min / 2 : .max / 2 }
        return Ticks(attoseconds / 1_000_000_000)
    }

    /// Out of line: `ContinuousClock.Instant` is a resilient type, so a function that reads the
    /// clock inline allocates stack space for one dynamically on every call, needed or not (the
    /// posting hot path did, for a time stamp it takes only while an instrument listens).
    static var now: Ticks {
        @inline(never) get { ticks(.now) }
    }

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
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        guard seconds < Int64.max / 1_000_000_000 else { return .max }
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
