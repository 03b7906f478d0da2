import Synchronization

// The mode tables: which items each mode holds, the common set, and the run stack.
// Everything here is guarded by `Loop.state`; other threads add and remove items under that lock,
// and the loop thread reads a mode's tables under it between callouts (never during one).
//
// Every item belongs to one loop, and records the modes of that loop it is in (`Membership`,
// guarded by the same lock): membership tests and removals need no table lookups, which keeps
// scheduling and firing large numbers of timers cheap.

/// Records `loop` as an item's owner: an item belongs to one loop for its whole life, and adding
/// it to a second one is a programmer error.
func bindOwner(_ owner: inout Loop?, to loop: Loop, kind: String) {
    if let current = owner {
        precondition(
            current === loop,
            "RunLoopKit: a \(kind) belongs to one loop; it was added to a second loop. Create another one for that loop"
        )
    }
    owner = loop
}

/// Forgets `loop` as an item's owner after an add that the ended loop refused, so that the item
/// can be added to another loop.
func unbindOwner(_ owner: inout Loop?, from loop: Loop) {
    if owner === loop { owner = nil }
}

/// Counts changes to a loop's mode tables: bumped under the loop's `state` lock, read without it,
/// so the loop thread can reuse what it last read about its mode until something changes.
final class TableVersion: Sendable {
    private let value = Atomic<UInt64>(1)

    func bump() { value.add(1, ordering: .releasing) }

    var current: UInt64 { value.load(ordering: .acquiring) }
}

/// A short list of distinct modes, the first two stored inline: almost every item is in one mode
/// or in the two default common modes, and adding a timer should not allocate an array for that.
struct ModeList: Sequence {
    private var first: Loop.Mode?
    private var second: Loop.Mode?
    private var others: [Loop.Mode] = []

    var isEmpty: Bool { first == nil }

    func contains(_ mode: Loop.Mode) -> Bool {
        first == mode || second == mode || (!others.isEmpty && others.contains(mode))
    }

    /// Appends `mode`; the caller checks it is not there yet.
    mutating func append(_ mode: Loop.Mode) {
        if first == nil {
            first = mode
        } else if second == nil {
            second = mode
        } else {
            others.append(mode)
        }
    }

    /// Removes `mode`; returns false if it was not there.
    mutating func remove(_ mode: Loop.Mode) -> Bool {
        if first == mode {
            first = second
            second = others.isEmpty ? nil : others.removeFirst()
        } else if second == mode {
            second = others.isEmpty ? nil : others.removeFirst()
        } else if let index = others.firstIndex(of: mode) {
            others.remove(at: index)
        } else {
            return false
        }
        return true
    }

    /// Filled in order (`second` only after `first`, `others` only after both), so iteration stops
    /// at the first empty slot.
    struct Iterator: IteratorProtocol {
        fileprivate let list: ModeList
        fileprivate var index = 0

        mutating func next() -> Loop.Mode? {
            defer { index += 1 }
            switch index {
            case 0: return list.first
            case 1: return list.second
            default: return index - 2 < list.others.count ? list.others[index - 2] : nil
            }
        }
    }

    func makeIterator() -> Iterator { Iterator(list: self) }
}

/// The modes of its loop an item is in. Guarded by the owning loop's `state` lock.
struct Membership {
    var modes = ModeList()
    /// Added to `.common` (so it joins modes added to the common set later).
    var isCommon = false
    /// Set for items that serve a public object of their own (a signal source's descriptor source,
    /// a frame link's timer): keeps that object alive while the item is in a mode.
    var keeper: ItemKeeper?

    var isEmpty: Bool { modes.isEmpty && !isCommon }

    /// Out of every mode (the loop's teardown); the keeper stays, emptied by `updateKeeper`.
    mutating func leaveEveryMode() {
        modes = ModeList()
        isCommon = false
    }
}

/// Keeps the public object an item serves alive while the item is in a mode of its loop, so that
/// a caller may drop a `LoopSignalSource` or a `FrameLink` once it is added: the loop holds the
/// item, and the item holds its object (weakly while it is in no mode, so that dropping an object
/// that is in no loop releases it). Guarded by the owning loop's `state` lock.
final class ItemKeeper: @unchecked Sendable {
    private weak var object: AnyObject?
    private var held: AnyObject?

    init(_ object: AnyObject) { self.object = object }

    /// Holds the object while `inAMode`; returns it when the item has just left its last mode, for
    /// the caller to release once the loop's lock is let go (its deinit may call into the loop).
    func update(inAMode: Bool) -> AnyObject? {
        if inAMode {
            if held == nil { held = object }
            return nil
        }
        defer { held = nil }
        return held
    }
}

extension Loop {
    /// An item a mode can hold.
    enum Item {
        case timer(LoopTimer)
        case observer(LoopObserver)
        case source(LoopSource)
        case descriptor(LoopDescriptorSource)

        var id: ObjectIdentifier {
            switch self {
            case .timer(let timer): ObjectIdentifier(timer)
            case .observer(let observer): ObjectIdentifier(observer)
            case .source(let source): ObjectIdentifier(source)
            case .descriptor(let source): ObjectIdentifier(source)
            }
        }

        /// The item's modes in its loop; read and written only under that loop's `state` lock.
        var membership: Membership {
            switch self {
            case .timer(let timer): timer.membership
            case .observer(let observer): observer.membership
            case .source(let source): source.membership
            case .descriptor(let source): source.membership
            }
        }

        /// Changes the membership in place (no copy of its mode list).
        @discardableResult
        func withMembership<R>(_ body: (inout Membership) -> R) -> R {
            switch self {
            case .timer(let timer): body(&timer.membership)
            case .observer(let observer): body(&observer.membership)
            case .source(let source): body(&source.membership)
            case .descriptor(let source): body(&source.membership)
            }
        }

        /// After a change of membership: the object the item serves, if it has just left its
        /// last mode (release it outside the lock).
        func updateKeeper() -> AnyObject? {
            withMembership { membership in membership.keeper?.update(inAMode: !membership.isEmpty) }
        }

        /// Forgets `loop` as the item's owner, if it is, after an add the ended loop refused.
        func unbind(from loop: Loop) {
            switch self {
            case .timer(let timer): timer.unbind(from: loop)
            case .observer(let observer): observer.unbind(from: loop)
            case .source(let source): source.unbind(from: loop)
            case .descriptor(let source): source.unbind(from: loop)
            }
        }

        /// Called once the loop has dropped the item at thread exit.
        func loopDidTearDown() {
            switch self {
            case .timer(let timer): timer.invalidate()
            case .observer(let observer): observer.invalidate()
            case .source(let source): source.invalidate()
            case .descriptor(let source): source.invalidate()
            }
        }
    }

    /// One mode's items.
    struct ModeItems {
        let mode: Mode
        /// Timers in the mode (they live in the heaps; membership says which entries count).
        var timerCount = 0
        /// Timers by fire date: the order they fire in.
        var byFireDate = TimerHeap()
        /// Timers by latest allowed fire time (fire date + tolerance): when the loop must wake.
        var byLatest = TimerHeap()
        /// Observers sorted by `order`, then by insertion.
        var observers: [LoopObserver] = []
        var observerMask: Activity = []
        var sources: [LoopSource] = []
        /// Keyed for O(1) removal: a server adds and removes one per connection.
        var descriptors: [ObjectIdentifier: LoopDescriptorSource] = [:]

        init(mode: Mode) { self.mode = mode }

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
        static func isLive(_ entry: TimerHeap.Entry, in mode: Mode) -> Bool {
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

        private static func liveTop(of heap: inout TimerHeap, in mode: Mode) -> TimerHeap.Entry? {
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

    /// One active `run`: the stack of these is what makes nested runs restore the outer mode.
    final class RunFrame: Sendable {
        let mode: Mode
        let stopped = Atomic<Bool>(false)
        init(mode: Mode) { self.mode = mode }
    }

    /// What the iteration reads about its mode on every pass, kept by the loop thread and reused
    /// until the tables change: most passes then take no lock and hash no mode name. A class, so
    /// that handing it out costs one reference count, not one per field.
    final class ModeView {
        let mode: Mode
        let version: UInt64
        let isCommon: Bool
        let hasSourcesOrTimers: Bool
        let observerMask: Activity
        /// By `order`, then insertion; the arrays are shared with the tables, not copied.
        let observers: [LoopObserver]
        let sources: [LoopSource]
        let nextFireDate: Ticks?
        /// The earliest latest-allowed fire time (fire date + tolerance): when the loop must wake
        /// for timers, which lets tolerant timers share a wake-up.
        let nextWake: Ticks?

        init(mode: Mode, version: UInt64, isCommon: Bool, items: ModeItems?, nextFireDate: Ticks?, nextWake: Ticks?) {
            self.mode = mode
            self.version = version
            self.isCommon = isCommon
            self.hasSourcesOrTimers = items?.hasSourcesOrTimers ?? false
            self.observerMask = items?.observerMask ?? []
            self.observers = items?.observers ?? []
            self.sources = items?.sources ?? []
            self.nextFireDate = nextFireDate
            self.nextWake = nextWake
        }
    }

    /// `mode`'s view, read again under the lock only if the tables changed since. Loop thread only.
    func view(of mode: Mode) -> ModeView {
        let version = tablesVersion.current
        if let view = modeView, view.version == version, view.mode == mode { return view }
        let view = state.withLock { state in
            let isCommon = state.commonModes.contains(mode)
            // Read inside the lock: no change can land between this and the tables read below.
            let version = state.version.current
            guard state.modes[mode] != nil else {
                return ModeView(
                    mode: mode, version: version, isCommon: isCommon, items: nil, nextFireDate: nil, nextWake: nil)
            }
            // Dropping stale heap tops leaves the live tops as they were: not a change.
            let nextFireDate = state.modes[mode]!.liveTopByFireDate()?.key
            let nextWake = state.modes[mode]!.liveTopByLatest()?.key
            return ModeView(
                mode: mode, version: version, isCommon: isCommon, items: state.modes[mode], nextFireDate: nextFireDate,
                nextWake: nextWake)
        }
        modeView = view
        return view
    }

    struct State {
        /// Bumped by every change to what follows; read without the lock (see `ModeView`).
        let version: TableVersion
        var modes: [Mode: ModeItems] = [:]
        var commonModes: Set<Mode> = [.default, .tracking]
        /// Items added to `.common`: they join every mode later added to the common set.
        /// With the sequence number of their joining, so that a mode added to the common set later
        /// receives them in that order (observers with equal `order` keep their tie order).
        var commonItems: [ObjectIdentifier: (item: Item, joined: UInt64)] = [:]
        var runStack: [RunFrame] = []
        /// Descriptor sources added, removed, changed or invalidated since the loop thread last
        /// brought libevent in line (see `LoopDescriptorSource.swift`).
        var descriptorChanges: [LoopDescriptorSource] = []
        /// Source of insertion sequence numbers (observer tie-breaks, heap tie-breaks).
        var nextSequence: UInt64 = 0
        /// Set once the loop has ended (see `Loop.end()`): items are no longer added.
        var ended = false
        /// What a change dropped (heaps of a mode that lost its last timer): released by the
        /// caller once the lock is let go, because a timer's handler may hold objects whose
        /// deinit calls into the loop.
        var garbage: [TimerHeap] = []

        mutating func sequence() -> UInt64 {
            nextSequence &+= 1
            return nextSequence
        }

        init(version: TableVersion = TableVersion()) {
            self.version = version
        }

        /// Runs `body` on `mode`'s tables in place (one hash lookup, no copy), creating them if
        /// needed. Every change to a mode's tables goes through here, so it counts as a change.
        mutating func withItems<R>(of mode: Mode, _ body: (inout ModeItems) -> R) -> R {
            version.bump()
            return body(&modes[mode, default: ModeItems(mode: mode)])
        }

        /// Inserts `item` into one real mode. Returns false if it was already there.
        @discardableResult
        mutating func insert(_ item: Item, into mode: Mode) -> Bool {
            let added = item.withMembership { membership in
                guard !membership.modes.contains(mode) else { return false }
                membership.modes.append(mode)
                return true
            }
            guard added else { return false }
            let seq = sequence()
            withItems(of: mode) { items in
                switch item {
                case .timer(let timer):
                    items.timerCount += 1
                    items.push(timer, timer.schedule, sequence: seq)
                case .observer(let observer):
                    observer.sequence = seq
                    let index =
                        items.observers.firstIndex { ($0.order, $0.sequence) > (observer.order, seq) }
                        ?? items.observers.endIndex
                    items.observers.insert(observer, at: index)
                    items.recomputeObserverMask()
                case .source(let source):
                    items.sources.append(source)
                case .descriptor(let source):
                    items.descriptors[ObjectIdentifier(source)] = source
                }
            }
            return true
        }

        /// Removes `item` from one real mode. Returns false if it was not there.
        @discardableResult
        mutating func remove(_ item: Item, from mode: Mode) -> Bool {
            let removed = item.withMembership { membership in
                membership.modes.remove(mode)
            }
            guard removed else { return false }
            let dropped: [TimerHeap] = withItems(of: mode) { items in
                switch item {
                case .timer:
                    // Its heap entries go stale (membership no longer names the mode).
                    items.timerCount -= 1
                    guard items.timerCount == 0, items.byFireDate.count > 0 else {
                        items.compactIfSparse()
                        return []
                    }
                    // No timer left, so every entry is stale: drop them now, so that a removed
                    // timer goes with the caller's last reference to it.
                    defer {
                        items.byFireDate = TimerHeap()
                        items.byLatest = TimerHeap()
                    }
                    return [items.byFireDate, items.byLatest]
                case .observer(let observer):
                    items.observers.removeAll { $0 === observer }
                    items.recomputeObserverMask()
                case .source(let source):
                    items.sources.removeAll { $0 === source }
                case .descriptor(let source):
                    items.descriptors[ObjectIdentifier(source)] = nil
                }
                return []
            }
            garbage.append(contentsOf: dropped)
            return true
        }

        /// Adds `item` to `mode`, where `.common` means the common set.
        mutating func add(_ item: Item, forMode mode: Mode) {
            guard mode == .common else {
                insert(item, into: mode)
                return
            }
            guard !item.membership.isCommon else { return }
            item.withMembership { $0.isCommon = true }
            commonItems[item.id] = (item, sequence())
            for common in commonModes {
                insert(item, into: common)
            }
        }

        /// Removes `item` from `mode`, where `.common` means every mode of the common set.
        mutating func remove(_ item: Item, forMode mode: Mode) {
            guard mode == .common else {
                remove(item, from: mode)
                return
            }
            guard item.membership.isCommon else { return }
            item.withMembership { $0.isCommon = false }
            commonItems[item.id] = nil
            for common in commonModes {
                remove(item, from: common)
            }
        }

        /// Removes `item` from every mode and from the common set.
        mutating func removeEverywhere(_ item: Item) {
            if item.membership.isCommon {
                item.withMembership { $0.isCommon = false }
                commonItems[item.id] = nil
            }
            for mode in item.membership.modes {
                remove(item, from: mode)
            }
        }

        func contains(_ item: Item, in mode: Mode) -> Bool {
            mode == .common ? item.membership.isCommon : item.membership.modes.contains(mode)
        }

        func allItems() -> [Item] {
            var seen: [ObjectIdentifier: Item] = commonItems.mapValues(\.item)
            for items in modes.values {
                for timer in items.timers { seen[ObjectIdentifier(timer)] = .timer(timer) }
                for observer in items.observers { seen[ObjectIdentifier(observer)] = .observer(observer) }
                for source in items.sources { seen[ObjectIdentifier(source)] = .source(source) }
                for source in items.descriptors.values { seen[ObjectIdentifier(source)] = .descriptor(source) }
            }
            return Array(seen.values)
        }
    }

    /// Adds `item` to `mode`, where `.common` means the common set. Any thread.
    ///
    /// Returns false, adding nothing, if the loop has ended: the item is then unbound from it, so
    /// that it can be added to another loop.
    @discardableResult
    func insert(_ item: Item, forMode mode: Mode) -> Bool {
        let added = state.withLock { state in
            guard !state.ended else { return false }
            state.add(item, forMode: mode)
            _ = item.updateKeeper()  // never returns an object when adding
            return true
        }
        guard added else {
            item.unbind(from: self)
            return false
        }
        wakeUpIfForeign()
        return true
    }

    /// Removes `item` from `mode`, where `.common` means every mode of the common set. Any thread.
    func remove(_ item: Item, forMode mode: Mode) {
        changeMembership(of: item) { $0.remove(item, forMode: mode) }
    }

    /// Removes an invalidated item from every mode. Any thread.
    func removeEverywhere(_ item: Item) {
        changeMembership(of: item) { $0.removeEverywhere(item) }
    }

    /// Takes `item` out of modes under the lock; what that released (the object the item served,
    /// heaps of stale timers) goes after the lock is let go, since a deinit may call into the loop.
    private func changeMembership(of item: Item, _ change: (inout State) -> Void) {
        let released: (AnyObject?, [TimerHeap]) = state.withLock { state in
            change(&state)
            defer { state.garbage.removeAll() }
            return (item.updateKeeper(), state.garbage)
        }
        removals.add(1, ordering: .releasing)
        wakeUpIfForeign()
        withExtendedLifetime(released) {}
    }

    func contains(_ item: Item, inMode mode: Mode) -> Bool {
        state.withLock { $0.contains(item, in: mode) }
    }

    /// Pushes a rescheduled timer's new entries into the heaps of every mode holding it. Any thread.
    func timerDidReschedule(_ timer: LoopTimer) {
        state.withLock { state in
            let modes = timer.membership.modes
            guard !modes.isEmpty else { return }
            let schedule = timer.schedule
            for mode in modes {
                let seq = state.sequence()
                state.withItems(of: mode) { $0.push(timer, schedule, sequence: seq) }
            }
        }
        wakeUpIfForeign()
    }
}
