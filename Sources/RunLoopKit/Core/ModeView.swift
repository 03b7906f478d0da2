import Synchronization

/// What the iteration reads about its mode on every pass, kept by the loop thread and reused
/// until the tables change: most passes then take no lock and hash no mode name. A class, so
/// that handing it out costs one reference count, not one per field, and reading a field through
/// `Loop.withView(of:_:)` none.
final class ModeView {
    let mode: Loop.Mode
    let version: UInt64
    let isCommon: Bool
    let hasSourcesOrTimers: Bool
    let observerMask: Loop.Activity
    /// By `order`, then insertion; the arrays are shared with the tables, not copied (observers of
    /// several orders excepted: their groups are copied into one, `ObserverList.inOrder`). Only a
    /// view made for a walk over them (`Loop.view(of:walking:)`) holds them: while the loop holds
    /// them, a change from another thread copies the whole array (copy on write), so a view made
    /// for the scalars (every pass after a change) must not, or each change would cost O(n).
    let observers: [ObserverEntry]
    /// With holes where sources left (`ModeSlots`).
    let sources: [LoopSource?]
    /// Whether `observers` and `sources` are the tables' (otherwise they are empty).
    let hasArrays: Bool
    let nextFireDate: Ticks?
    /// The earliest latest-allowed fire time (fire date + tolerance): when the loop must wake
    /// for timers, which lets tolerant timers share a wake-up.
    let nextWake: Ticks?

    init(
        mode: Loop.Mode, version: UInt64, isCommon: Bool, items: ModeItems?, arrays: Bool, nextFireDate: Ticks?,
        nextWake: Ticks?
    ) {
        self.mode = mode
        self.version = version
        self.isCommon = isCommon
        self.hasSourcesOrTimers = items?.hasSourcesOrTimers ?? false
        self.observerMask = items?.observerMask ?? []
        self.observers = arrays ? items?.observers.inOrder ?? [] : []
        self.sources = arrays ? items?.sources.entries ?? [] : []
        self.hasArrays = arrays
        self.nextFireDate = nextFireDate
        self.nextWake = nextWake
    }
}

extension Loop {
    /// Runs `body` with `mode`'s view, without a reference count when the view the loop keeps is
    /// still current. `body` must not call out or change the tables (it reads fields; a callout
    /// could replace the kept view and release it under `body`). Loop thread only.
    ///
    /// A pass reads the view several times, and each read through `view(of:)` was a retain and a
    /// release (docs/performance-notes.md#instructions-per-pass).
    @inline(__always)
    func withView<R>(of mode: Mode, walking: Bool = false, _ body: (ModeView) -> R) -> R {
        if let kept = onThread.modeViewReference {
            let version = tablesVersion.current
            let current = kept._withUnsafeGuaranteedRef {
                $0.version == version && $0.mode == mode && ($0.hasArrays || !walking)
            }
            if current { return kept._withUnsafeGuaranteedRef(body) }
        }
        return body(view(of: mode, walking: walking))
    }

    /// `mode`'s view, read again under the lock only if the tables changed since, or if `walking`
    /// asks for its observers and sources and the kept view has none. Loop thread only.
    ///
    /// Filling and emptying a mode of 50,000 sources from another thread took 46 times as long as
    /// 5,000 while every view held the arrays; about ten times with only walks holding them.
    func view(of mode: Mode, walking: Bool = false) -> ModeView {
        let version = tablesVersion.current
        if let view = onThread.modeView, view.version == version, view.mode == mode, view.hasArrays || !walking {
            return view
        }
        let view = withTables { state in
            let isCommon = state.commonModes.contains(mode)
            // Read inside the lock: no change can land between this and the tables read below.
            let version = state.version.current
            let view = state.withExistingItems(of: mode) { items in
                // The walk visits every entry: holes left by removals go first.
                if walking { items.sources.squeezeIfSparse(items.slot) }
                // Dropping stale heap tops leaves the live tops as they were: not a change.
                let nextFireDate = items.liveTopByFireDate()?.entry.key
                let nextWake = items.nextWake()
                return ModeView(
                    mode: mode, version: version, isCommon: isCommon, items: items, arrays: walking,
                    nextFireDate: nextFireDate, nextWake: nextWake)
            }
            return view
                ?? ModeView(
                    mode: mode, version: version, isCommon: isCommon, items: nil, arrays: walking, nextFireDate: nil,
                    nextWake: nil)
        }
        onThread.modeView = view
        return view
    }
}
