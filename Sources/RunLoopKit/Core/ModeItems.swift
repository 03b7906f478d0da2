/// One mode's items: what a `ModeTable` keeps per mode.
struct ModeItems {
    let mode: Loop.Mode
    /// Timers in the mode (they live in the heaps; membership says which entries count).
    var timerCount = 0
    /// Timers by fire date: the order they fire in.
    var byFireDate = TimerHeap()
    /// Timers by latest allowed fire time (fire date + tolerance): when the loop must wake.
    var byLatest = TimerHeap()
    /// Observers sorted by `order`, then by insertion.
    var observers: [LoopObserver] = []
    var observerMask: Loop.Activity = []
    var sources: [LoopSource] = []
    /// Keyed for O(1) removal: a server adds and removes one per connection.
    var descriptors: [ObjectIdentifier: LoopDescriptorSource] = [:]

    init(mode: Loop.Mode) { self.mode = mode }

    /// Observers do not keep a mode alive; sources and timers do (blocks are counted by the loop).
    var hasSourcesOrTimers: Bool { timerCount > 0 || !sources.isEmpty || !descriptors.isEmpty }

    mutating func recomputeObserverMask() {
        observerMask = observers.reduce(into: []) { $0.formUnion($1.activities) }
    }

    mutating func push(_ timer: LoopTimer, _ schedule: LoopTimer.Schedule, sequence: UInt64) {
        guard schedule.isValid else { return }
        byFireDate.push(schedule.fireDate, sequence, timer, schedule.generation)
        byLatest.push(schedule.latest, sequence, timer, schedule.generation)
        compactIfSparse()
    }

    /// Whether a heap entry still stands for a scheduled fire of a timer of this mode.
    static func isLive(_ entry: TimerHeap.Entry, in mode: Loop.Mode) -> Bool {
        // No timer lock: the generation is mirrored in an atomic (`.max` once invalidated).
        entry.timer.liveGeneration.load(ordering: .acquiring) == entry.generation
            && entry.timer.membership.modes.contains(mode)
    }

    /// Keeps stale entries (rescheduled, removed or invalidated timers) from piling up: a heap
    /// is compacted when more than half of it is stale, so the cost is amortised O(1).
    mutating func compactIfSparse() {
        let limit = 2 * timerCount + 64
        let mode = self.mode
        if byFireDate.count > limit { byFireDate.compact { ModeItems.isLive($0, in: mode) } }
        if byLatest.count > limit { byLatest.compact { ModeItems.isLive($0, in: mode) } }
    }

    /// Pops stale entries off the top of `byFireDate`; returns the live top.
    mutating func liveTopByFireDate() -> TimerHeap.Entry? {
        ModeItems.liveTop(of: &byFireDate, in: mode)
    }

    /// Pops stale entries off the top of `byLatest`; returns the live top.
    mutating func liveTopByLatest() -> TimerHeap.Entry? {
        ModeItems.liveTop(of: &byLatest, in: mode)
    }

    private static func liveTop(of heap: inout TimerHeap, in mode: Loop.Mode) -> TimerHeap.Entry? {
        while let top = heap.top {
            if isLive(top, in: mode) { return top }
            heap.pop()
        }
        return nil
    }

    /// Every timer with an entry in this mode's heaps and still in the mode.
    var timers: [LoopTimer] {
        var seen = Set<ObjectIdentifier>()
        return byFireDate.entries.compactMap { entry in
            guard entry.timer.membership.modes.contains(mode),
                seen.insert(ObjectIdentifier(entry.timer)).inserted
            else { return nil }
            return entry.timer
        }
    }
}
