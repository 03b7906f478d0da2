// Whether a listener or a datagram socket is open: one value under the item's lock, changed in
// one place by the two events below, and checked against this table in debug builds.
//
// | from | event | to | effect |
// |---|---|---|---|
// | `open` | `invalidationBegan` (`invalidate()`, before the source goes) | `invalidated` | |
// | `open`, `invalidated` | `finish` (the source is invalid, or the item is released) | `finished` | the caller lets go of what the item holds |
// | `invalidated`, `finished` | `invalidationBegan` | the same | |
// | `finished` | `finish` | `finished` | |
//
// Only an open item takes new work; `isValid` is `open`. `invalidate()` leaves `open` before the
// source closes the descriptor, so that no thread reads the item open after it returns. A source
// its loop invalidates (the teardown, a failure to watch) tells the item after the descriptor is
// closed: until then another thread still reads it open, as a call racing `invalidate()` may
// between its check and its system call. `finish` answers true once, so that what the item
// holds (a queue, waiters, handlers, a reserve descriptor, a Unix path a later item may have
// bound since) is let go exactly once, whichever of `invalidate()`, the source and `deinit` comes
// first.

/// Whether a listener or a datagram socket is open (see the table above).
enum ResidentLifecycle: CheckedStep, CaseIterable, Sendable {
    case open
    /// `invalidate()` was called: nothing new is taken; the item lets go once its source is
    /// invalid.
    case invalidated
    /// What the item held was let go.
    case finished

    var isOpen: Bool { self == .open }

    /// `invalidate()` was called, before the item's source is invalidated (so that the item reads
    /// invalid before its descriptor is closed).
    mutating func invalidationBegan() {
        if self == .open { become(.invalidated) }
    }

    /// The item's source is invalid, or the item is released: returns whether the caller is the
    /// one to let go.
    mutating func finish() -> Bool {
        guard self != .finished else { return false }
        become(.finished)
        return true
    }

    /// Whether the lifecycle may go from `from` to `next` (the table above), checked in debug
    /// builds.
    static func mayChange(_ from: ResidentLifecycle, to next: ResidentLifecycle) -> Bool {
        switch (from, next) {
        case (.open, .invalidated), (.open, .finished): true
        case (.invalidated, .invalidated), (.invalidated, .finished): true
        case (.finished, .finished): true
        default: false
        }
    }

    static let checkedName = "a listener's or datagram socket's lifecycle"
}
