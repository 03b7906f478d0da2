/// One mode's items: what a `ModeTable` keeps per mode.
struct ModeItems {
    let mode: Loop.Mode
    /// The mode's number in its loop's tables (what items' memberships record).
    let slot: ModeSlot
    /// Timers in the mode (they live in the heaps; membership says which entries count).
    var timerCount = 0
    /// Timers without tolerance by fire date, which is also their latest fire time: one entry
    /// each, where a tolerant timer needs two (most timers have none).
    var exact = TimerHeap()
    /// Tolerant timers by fire date: the order they fire in.
    var byFireDate = TimerHeap()
    /// Tolerant timers by latest allowed fire time (fire date + tolerance): when the loop must wake.
    var byLatest = TimerHeap()
    /// Observers by `order`, then by insertion (`ObserverList`).
    var observers = ObserverList()
    var observerMask: Loop.Activity = []
    /// How many observers watch each activity (by bit), so that the mask is kept in O(1).
    private var activityCounts = ActivityCounts()
    /// In no particular order (they are performed sorted by order and signal time), O(1) to add
    /// and remove (`ModeSlots`).
    var sources = ModeSlots<LoopSource>()
    /// Heap entries popped or compacted away under the lock, for the caller to release after it
    /// (a stale entry may hold a removed timer's last reference, and its handler's captures may
    /// call into the loop as they go).
    var dropped: [TimerHeap.Entry] = []
    /// As `sources`: a server adds and removes one per connection.
    var descriptors = ModeSlots<LoopDescriptorSource>()

    init(mode: Loop.Mode, slot: ModeSlot) {
        self.mode = mode
        self.slot = slot
    }

    /// Observers do not keep a mode alive; sources and timers do (blocks are counted by the loop).
    var hasSourcesOrTimers: Bool { timerCount > 0 || !sources.isEmpty || !descriptors.isEmpty }

    /// Enters `observer` with its insertion `sequence`.
    mutating func insertObserver(_ observer: LoopObserver, sequence: UInt64) {
        observers.insert(observer, sequence: sequence)
        observerMask = activityCounts.add(observer.activities)
    }

    /// Takes out the observer entered with `sequence`.
    mutating func removeObserver(_ observer: LoopObserver, sequence: UInt64) {
        observers.remove(observer, sequence: sequence)
        observerMask = activityCounts.remove(observer.activities)
    }

    /// Places the timer's schedule in the heaps. In the timer's first mode a schedule goes in
    /// tracked entries (exact: one in `exact`; tolerant: one in `byFireDate` and one in
    /// `byLatest`), moved in place when the timer is re-armed, so that re-arming leaves no stale
    /// entry; elsewhere new entries are pushed and the old ones go stale. Inlined into adding a
    /// timer (docs/performance-notes.md#instructions-per-timer).
    @inline(__always)
    mutating func push(_ timer: LoopTimer, _ schedule: LoopTimer.Schedule, sequence: UInt64) {
        guard schedule.isValid else { return }
        guard timer.membership.modes.startsWith(slot) else {
            pushUntracked(timer, schedule, sequence: sequence)
            return
        }
        let tracked = Int(timer.membership.trackedEntry)
        if schedule.latest == schedule.fireDate {
            if exact.isTrackedEntry(at: tracked, of: timer) {
                exact.update(at: tracked, key: schedule.fireDate, sequence: sequence, generation: schedule.generation)
            } else {
                if timer.membership.trackedEntry >= 0 || timer.membership.trackedLatest >= 0 {
                    removeTolerantEntries(of: timer)
                }
                exact.push(schedule.fireDate, sequence, timer, schedule.generation, tracked: .first)
            }
            compactIfSparse()
        } else {
            pushTolerant(timer, schedule, sequence: sequence)
        }
    }

    /// `push` for a tolerant schedule in the timer's first mode: each of its two entries moved
    /// in place if it is still there (one that fired has left `byFireDate`), pushed otherwise.
    private mutating func pushTolerant(_ timer: LoopTimer, _ schedule: LoopTimer.Schedule, sequence: UInt64) {
        let tracked = Int(timer.membership.trackedEntry)
        if exact.isTrackedEntry(at: tracked, of: timer) { exact.remove(at: tracked) }
        let first = Int(timer.membership.trackedEntry)
        if byFireDate.isTrackedEntry(at: first, of: timer) {
            byFireDate.update(at: first, key: schedule.fireDate, sequence: sequence, generation: schedule.generation)
        } else {
            byFireDate.push(schedule.fireDate, sequence, timer, schedule.generation, tracked: .first)
        }
        let latest = Int(timer.membership.trackedLatest)
        if byLatest.isTrackedEntry(at: latest, of: timer, as: .second) {
            byLatest.update(at: latest, key: schedule.latest, sequence: sequence, generation: schedule.generation)
        } else {
            byLatest.push(schedule.latest, sequence, timer, schedule.generation, tracked: .second)
        }
        compactIfSparse()
    }

    /// `push` in a mode other than the timer's first: new entries, the old ones go stale.
    private mutating func pushUntracked(_ timer: LoopTimer, _ schedule: LoopTimer.Schedule, sequence: UInt64) {
        if schedule.latest == schedule.fireDate {
            exact.push(schedule.fireDate, sequence, timer, schedule.generation)
        } else {
            byFireDate.push(schedule.fireDate, sequence, timer, schedule.generation)
            byLatest.push(schedule.latest, sequence, timer, schedule.generation)
        }
        compactIfSparse()
    }

    /// Removes the timer's tracked entries if they are in this mode (the timer is leaving it).
    @inline(__always)
    mutating func removeTrackedEntry(of timer: LoopTimer) {
        let tracked = Int(timer.membership.trackedEntry)
        if exact.isTrackedEntry(at: tracked, of: timer) { exact.remove(at: tracked) }
        if timer.membership.trackedEntry >= 0 || timer.membership.trackedLatest >= 0 {
            removeTolerantEntries(of: timer)
        }
    }

    /// Removes the timer's tracked entries from `byFireDate` and `byLatest`, if there. Out of
    /// line: most timers have no tolerance, and inlined it made removing any timer dearer.
    @inline(never)
    private mutating func removeTolerantEntries(of timer: LoopTimer) {
        let first = Int(timer.membership.trackedEntry)
        if byFireDate.isTrackedEntry(at: first, of: timer) { byFireDate.remove(at: first) }
        let latest = Int(timer.membership.trackedLatest)
        if byLatest.isTrackedEntry(at: latest, of: timer, as: .second) { byLatest.remove(at: latest) }
    }

    /// Puts back an entry that `popFirstDue` took, in the heap it came from (untracked: the timer
    /// may have a tracked entry again by now).
    mutating func restore(_ entry: TimerHeap.Entry, exact isExact: Bool) {
        if isExact {
            exact.push(entry.key, entry.sequence, entry.timer, entry.generation)
        } else {
            byFireDate.push(entry.key, entry.sequence, entry.timer, entry.generation)
        }
    }

    /// Whether a heap entry still stands for a scheduled fire of a timer of this mode.
    static func isLive(_ entry: TimerHeap.Entry, in mode: ModeSlot) -> Bool {
        // No timer lock: the generation is mirrored in an atomic (`.max` once invalidated).
        entry.timer.liveGeneration.load(ordering: .acquiring) == entry.generation
            && entry.timer.membership.modes.contains(mode)
    }

    /// Keeps stale entries (rescheduled, removed or invalidated timers) from piling up: a heap
    /// is compacted when more than half of it is stale, so the cost is amortised O(1).
    @inline(__always)
    mutating func compactIfSparse() {
        // Wrapping arithmetic and one comparison: it runs twice per timer added and removed.
        let limit = 2 &* timerCount &+ 64
        guard max(exact.count, byFireDate.count, byLatest.count) > limit else { return }
        compactSparseHeaps(limit: limit)
    }

    private mutating func compactSparseHeaps(limit: Int) {
        let mode = slot
        if exact.count > limit { exact.compact(dropping: &dropped) { ModeItems.isLive($0, in: mode) } }
        if byFireDate.count > limit { byFireDate.compact(dropping: &dropped) { ModeItems.isLive($0, in: mode) } }
        if byLatest.count > limit { byLatest.compact(dropping: &dropped) { ModeItems.isLive($0, in: mode) } }
    }

    /// Pops stale entries off the tops of the heaps by fire date; returns the live entry that
    /// fires first, and whether it is in `exact`.
    mutating func liveTopByFireDate() -> (entry: TimerHeap.Entry, exact: Bool)? {
        let exactTop = ModeItems.liveTop(of: &exact, in: slot, dropping: &dropped)
        guard let tolerantTop = ModeItems.liveTop(of: &byFireDate, in: slot, dropping: &dropped) else {
            return exactTop.map { ($0, true) }
        }
        guard let exactTop, exactTop.precedes(tolerantTop) else { return (tolerantTop, false) }
        return (exactTop, true)
    }

    /// Pops stale entries off the tops of the heaps by latest fire time; returns the earliest
    /// latest fire time: when the loop must wake.
    mutating func nextWake() -> Ticks? {
        let exactTop = ModeItems.liveTop(of: &exact, in: slot, dropping: &dropped)?.key
        guard let tolerantTop = ModeItems.liveTop(of: &byLatest, in: slot, dropping: &dropped)?.key else {
            return exactTop
        }
        return min(exactTop ?? tolerantTop, tolerantTop)
    }

    /// Takes the live entry that fires first off its heap if it is due at `now`; with whether it
    /// came from `exact`.
    mutating func popFirstDue(at now: Ticks) -> (entry: TimerHeap.Entry, exact: Bool)? {
        guard let (top, isExact) = liveTopByFireDate(), top.key <= now else { return nil }
        if isExact { exact.pop() } else { byFireDate.pop() }
        return (top, isExact)
    }

    private static func liveTop(
        of heap: inout TimerHeap, in mode: ModeSlot, dropping dropped: inout [TimerHeap.Entry]
    ) -> TimerHeap.Entry? {
        while let top = heap.top {
            if isLive(top, in: mode) { return top }
            if let stale = heap.pop() { dropped.append(stale) }
        }
        return nil
    }

    /// Takes every heap away (the mode lost its last timer, so every entry is stale).
    mutating func takeHeaps() -> [TimerHeap] {
        defer {
            exact = TimerHeap()
            byFireDate = TimerHeap()
            byLatest = TimerHeap()
        }
        return [exact, byFireDate, byLatest]
    }

    var hasHeapEntries: Bool { exact.count > 0 || byFireDate.count > 0 }

    /// Every timer with an entry in this mode's heaps and still in the mode.
    var timers: [LoopTimer] {
        var seen = Set<ObjectIdentifier>()
        return (exact.entries + byFireDate.entries).compactMap { entry in
            guard entry.timer.membership.modes.contains(slot),
                seen.insert(ObjectIdentifier(entry.timer)).inserted
            else { return nil }
            return entry.timer
        }
    }
}

/// A mode's observers, called by `order`, then by insertion: a group per `order` (sorted; a loop
/// uses a few orders), each group's entries in the order they joined, with holes (`observer` nil)
/// where observers left. An observer joins at the end of its group (sequence numbers only grow);
/// it leaves by binary search on its sequence number, O(log n), and a group's holes are squeezed
/// out once they outnumber its observers, amortised O(1). One sorted array took O(n) per observer
/// that did not sort last: 50,000 observers of three orders took 13–17 times as long as 5,000
/// (`ItemScaleTests`, debug build), and 43 times under ThreadSanitizer; 9–11 times now.
struct ObserverList {
    /// One `order`'s observers.
    struct Group {
        let order: Int
        /// By sequence number.
        var entries: [ObserverEntry]
        var holes = 0
    }

    /// By `order`.
    private(set) var groups: [Group] = []

    /// The entries of every group, by order then insertion, holes included, for a walk: the one
    /// group's own array when the mode's observers share one `order` (the usual case, no copy);
    /// otherwise a copy. Walking one array cost a pass 6 % less than walking group by group
    /// (`runloop-bench --filter iteration`, six observers, 6 alternating runs on a quiet machine).
    var inOrder: [ObserverEntry] {
        switch groups.count {
        case 0: []
        case 1: groups[0].entries
        default: groups.flatMap(\.entries)
        }
    }

    /// Every observer, by order then insertion.
    var all: some Sequence<LoopObserver> { groups.lazy.flatMap { $0.entries.lazy.compactMap(\.observer) } }

    mutating func insert(_ observer: LoopObserver, sequence: UInt64) {
        let entry = ObserverEntry(sequence: sequence, observer: observer)
        let index = groupIndex(observer.order)
        guard index < groups.count, groups[index].order == observer.order else {
            groups.insert(Group(order: observer.order, entries: [entry]), at: index)
            return
        }
        assert(
            groups[index].entries.last.map { $0.sequence < sequence } ?? true,
            "RunLoopKit: an observer joined a mode with an older sequence number")
        groups[index].entries.append(entry)
    }

    mutating func remove(_ observer: LoopObserver, sequence: UInt64) {
        let index = groupIndex(observer.order)
        assert(
            index < groups.count && groups[index].order == observer.order,
            "RunLoopKit: an observer's order left its mode")
        let entry = groups[index].entryIndex(sequence)
        assert(groups[index].entries[entry].observer === observer, "RunLoopKit: an observer missing from its mode")
        groups[index].entries[entry].observer = nil
        groups[index].holes += 1
        guard
            groups[index].holes > groups[index].entries.count / 2 + 16
                || groups[index].holes == groups[index].entries.count
        else { return }
        groups[index].entries.removeAll { $0.observer == nil }
        groups[index].holes = 0
        if groups[index].entries.isEmpty { groups.remove(at: index) }
    }

    /// The index of the group of `order`, or where it would go.
    private func groupIndex(_ order: Int) -> Int {
        groups.firstIndex(notBefore: order, by: \.order)
    }
}

extension ObserverList.Group {
    /// The first entry whose sequence number is not below `sequence`.
    func entryIndex(_ sequence: UInt64) -> Int {
        entries.firstIndex(notBefore: sequence, by: \.sequence)
    }
}

extension Array {
    /// Binary search in an array sorted by `key`: the first index whose key is not below `value`
    /// (`count` if none).
    @inline(__always)
    fileprivate func firstIndex<Key: Comparable>(notBefore value: Key, by key: (Element) -> Key) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if key(self[middle]) < value { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// An observer's place in its group: its sequence number, kept when the observer leaves (a hole),
/// so the group stays sorted for the binary search.
struct ObserverEntry {
    let sequence: UInt64
    var observer: LoopObserver?
}

/// How many observers of a mode watch each activity, by the activity's bit.
struct ActivityCounts {
    private var counts = [Int](repeating: 0, count: 32)

    /// Counts `activities` once more; returns the activities watched.
    mutating func add(_ activities: Loop.Activity) -> Loop.Activity { change(activities, by: 1) }

    /// Counts `activities` once less; returns the activities watched.
    mutating func remove(_ activities: Loop.Activity) -> Loop.Activity { change(activities, by: -1) }

    private mutating func change(_ activities: Loop.Activity, by delta: Int) -> Loop.Activity {
        var watched: UInt32 = 0
        for bit in 0..<32 {
            if activities.rawValue & (1 << bit) != 0 { counts[bit] += delta }
            if counts[bit] > 0 { watched |= 1 << bit }
        }
        return Loop.Activity(rawValue: watched)
    }
}
