import Synchronization

// The mode tables: which items each mode holds, the common set, and the run stack.
// Everything here is guarded by `Loop.state`; other threads add and remove items under that lock,
// and the loop thread reads a mode's tables under it between callouts (never during one).

extension Loop {
    /// An item a mode can hold.
    enum Item {
        case timer(LoopTimer)
        case observer(LoopObserver)
        case source(LoopSource)

        var id: ObjectIdentifier {
            switch self {
            case .timer(let timer): ObjectIdentifier(timer)
            case .observer(let observer): ObjectIdentifier(observer)
            case .source(let source): ObjectIdentifier(source)
            }
        }

        /// Called once the loop has dropped the item at thread exit.
        func loopDidTearDown(_ loop: Loop) {
            switch self {
            case .timer(let timer): timer.invalidate()
            case .observer(let observer): observer.invalidate()
            case .source(let source): source.loopDidRemove(loop)
            }
        }
    }

    /// One mode's items.
    struct ModeItems {
        var timers: [ObjectIdentifier: LoopTimer] = [:]
        /// Timers by fire date: the order they fire in.
        var byFireDate = TimerHeap()
        /// Timers by latest allowed fire time (fire date + tolerance): when the loop must wake.
        var byLatest = TimerHeap()
        /// Observers sorted by `order`, then by insertion.
        var observers: [LoopObserver] = []
        var observerMask: Activity = []
        var sources: [LoopSource] = []

        /// Observers do not keep a mode alive; sources and timers do (blocks are counted by the loop).
        var hasSourcesOrTimers: Bool { !timers.isEmpty || !sources.isEmpty }

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
        func isLive(_ entry: TimerHeap.Entry) -> Bool {
            guard timers[ObjectIdentifier(entry.timer)] != nil else { return false }
            let schedule = entry.timer.schedule
            return schedule.isValid && schedule.generation == entry.generation
        }

        /// Keeps stale entries (rescheduled, removed or invalidated timers) from piling up.
        mutating func compactIfSparse() {
            let limit = 2 * timers.count + 64
            guard byFireDate.count > limit || byLatest.count > limit else { return }
            let live = self
            byFireDate.compact(keeping: live.isLive)
            byLatest.compact(keeping: live.isLive)
        }

        /// Pops stale entries off `heap`'s top; returns the live top's key.
        mutating func liveTop(_ heap: WritableKeyPath<ModeItems, TimerHeap>) -> TimerHeap.Entry? {
            while let top = self[keyPath: heap].top {
                if isLive(top) { return top }
                self[keyPath: heap].pop()
            }
            return nil
        }
    }

    /// One active `run`: the stack of these is what makes nested runs restore the outer mode.
    final class RunFrame: Sendable {
        let mode: Mode
        let stopped = Atomic<Bool>(false)
        init(mode: Mode) { self.mode = mode }
    }

    struct State {
        var modes: [Mode: ModeItems] = [:]
        var commonModes: Set<Mode> = [.default, .tracking]
        /// Items added to `.common`: they join every mode later added to the common set.
        var commonItems: [ObjectIdentifier: Item] = [:]
        /// The modes each item is in, so invalidation need not scan every mode.
        var memberships: [ObjectIdentifier: Set<Mode>] = [:]
        var runStack: [RunFrame] = []
        /// Source of insertion sequence numbers (observer tie-breaks, heap tie-breaks).
        var nextSequence: UInt64 = 0

        mutating func sequence() -> UInt64 {
            nextSequence &+= 1
            return nextSequence
        }

        /// Inserts `item` into one real mode. Returns false if it was already there.
        @discardableResult
        mutating func insert(_ item: Item, into mode: Mode) -> Bool {
            guard memberships[item.id, default: []].insert(mode).inserted else { return false }
            let seq = sequence()
            if modes[mode] == nil { modes[mode] = ModeItems() }
            // Mutate in place (`modes[mode]!`) so the mode's tables are not copied.
            switch item {
            case .timer(let timer):
                modes[mode]!.timers[item.id] = timer
                modes[mode]!.push(timer, timer.schedule, sequence: seq)
            case .observer(let observer):
                observer.sequence = seq
                let index =
                    modes[mode]!.observers.firstIndex {
                        ($0.order, $0.sequence) > (observer.order, seq)
                    } ?? modes[mode]!.observers.endIndex
                modes[mode]!.observers.insert(observer, at: index)
                modes[mode]!.recomputeObserverMask()
            case .source(let source):
                modes[mode]!.sources.append(source)
            }
            return true
        }

        /// Removes `item` from one real mode. Returns false if it was not there.
        @discardableResult
        mutating func remove(_ id: ObjectIdentifier, from mode: Mode) -> Bool {
            guard memberships[id]?.remove(mode) != nil else { return false }
            if memberships[id]!.isEmpty { memberships[id] = nil }
            guard modes[mode] != nil else { return true }
            if modes[mode]!.timers.removeValue(forKey: id) != nil {
                // Heap entries go stale and are dropped lazily.
                modes[mode]!.compactIfSparse()
            } else if let index = modes[mode]!.observers.firstIndex(where: { ObjectIdentifier($0) == id }) {
                modes[mode]!.observers.remove(at: index)
                modes[mode]!.recomputeObserverMask()
            } else if let index = modes[mode]!.sources.firstIndex(where: { ObjectIdentifier($0) == id }) {
                modes[mode]!.sources.remove(at: index)
            }
            return true
        }

        /// Removes `item` from every mode and from the common set.
        mutating func removeEverywhere(_ id: ObjectIdentifier) {
            commonItems[id] = nil
            for mode in memberships[id] ?? [] {
                remove(id, from: mode)
            }
        }

        func contains(_ id: ObjectIdentifier, in mode: Mode) -> Bool {
            if mode == .common { return commonItems[id] != nil }
            return memberships[id]?.contains(mode) ?? false
        }

        func allItems() -> [Item] {
            var seen: [ObjectIdentifier: Item] = commonItems
            for items in modes.values {
                for timer in items.timers.values { seen[ObjectIdentifier(timer)] = .timer(timer) }
                for observer in items.observers { seen[ObjectIdentifier(observer)] = .observer(observer) }
                for source in items.sources { seen[ObjectIdentifier(source)] = .source(source) }
            }
            return Array(seen.values)
        }

        /// Whether `mode` is in `modes`, with `.common` standing for the common set.
        func matches(_ modesOfBlock: [Mode], running mode: Mode) -> Bool {
            for candidate in modesOfBlock {
                if candidate == mode || (candidate == .common && commonModes.contains(mode)) {
                    return true
                }
            }
            return false
        }
    }

    /// Adds `item` to `mode`, where `.common` means the common set. Any thread.
    func insert(_ item: Item, forMode mode: Mode) {
        state.withLock { state in
            if mode == .common {
                guard state.commonItems.updateValue(item, forKey: item.id) == nil else { return }
                for common in state.commonModes {
                    state.insert(item, into: common)
                }
            } else {
                state.insert(item, into: mode)
            }
        }
        wakeUpIfForeign()
    }

    /// Removes `item` from `mode`, where `.common` means every mode of the common set. Any thread.
    func remove(_ item: Item, forMode mode: Mode) {
        let stillHere = state.withLock { state in
            if mode == .common {
                if state.commonItems.removeValue(forKey: item.id) != nil {
                    for common in state.commonModes {
                        state.remove(item.id, from: common)
                    }
                }
            } else {
                state.remove(item.id, from: mode)
            }
            return state.memberships[item.id] != nil || state.commonItems[item.id] != nil
        }
        if !stillHere, case .source(let source) = item { source.loopDidRemove(self) }
        wakeUpIfForeign()
    }

    /// Removes an invalidated item from every mode. Any thread.
    func removeEverywhere(_ id: ObjectIdentifier) {
        state.withLock { $0.removeEverywhere(id) }
        wakeUpIfForeign()
    }

    func contains(_ id: ObjectIdentifier, inMode mode: Mode) -> Bool {
        state.withLock { $0.contains(id, in: mode) }
    }

    /// Pushes a rescheduled timer's new entries into the heaps of every mode holding it. Any thread.
    func timerDidReschedule(_ timer: LoopTimer) {
        let id = ObjectIdentifier(timer)
        state.withLock { state in
            guard let modes = state.memberships[id] else { return }
            let schedule = timer.schedule
            for mode in modes {
                let seq = state.sequence()
                state.modes[mode]?.push(timer, schedule, sequence: seq)
            }
        }
        wakeUpIfForeign()
    }
}
