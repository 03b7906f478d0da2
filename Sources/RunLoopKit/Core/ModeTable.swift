import Synchronization

// The mode tables: which items each mode holds, the common set, and the run stack. Everything
// here is guarded by `Loop.state`; other threads add and remove items under that lock, and the
// loop thread reads a mode's tables under it between callouts (never during one).
//
// Every item belongs to one loop, and records the modes of that loop it is in (`Membership`,
// guarded by the same lock): membership tests and removals need no table lookups, which keeps
// scheduling and firing large numbers of timers cheap.

/// Records `loop` as an item's owner: an item belongs to one loop for its whole life, and adding
/// it to a second one is a programmer error.
/// (`Owner` is the loop itself, or its `LoopLink`.)
func bindOwner<Owner: AnyObject>(_ owner: inout Owner?, to loop: Owner, kind: String) {
    if let current = owner {
        precondition(
            current === loop,
            "RunLoopKit: a \(kind) belongs to one loop; it was added to a second loop. Create another one for that loop"
        )
        return
    }
    owner = loop
}

/// Forgets `loop` as an item's owner after an add that the ended loop refused, so that the item
/// can be added to another loop.
func unbindOwner<Owner: AnyObject>(_ owner: inout Owner?, from loop: Owner) {
    if owner === loop { owner = nil }
}

/// Counts changes to a loop's mode tables: bumped under the loop's `state` lock, read without it,
/// so the loop thread can reuse what it last read about its mode until something changes.
final class TableVersion: Sendable {
    private let value = Atomic<UInt64>(1)

    /// Only under the loop's `state` lock, so writers never race: a load and a store, not a locked
    /// read-modify-write (every timer added or removed bumps it).
    func bump() { value.store(value.load(ordering: .relaxed) &+ 1, ordering: .releasing) }

    var current: UInt64 { value.load(ordering: .acquiring) }
}

/// One active `run`: the stack of these is what makes nested runs restore the outer mode.
final class RunFrame: Sendable {
    let mode: Loop.Mode
    let stopped = Atomic<Bool>(false)
    init(mode: Loop.Mode) { self.mode = mode }
}

/// A loop's modes and what they hold, the common set, and the run stack.
struct ModeTable {
    /// Bumped by every change to what follows; read without the lock (see `ModeView`).
    let version: TableVersion
    /// Each mode's tables, by `ModeSlot`; `slots` numbers the modes.
    private(set) var modes: [ModeItems] = []
    private var slots: [Loop.Mode: ModeSlot] = [:]
    /// The mode last looked up and its number: almost every change lands in the mode of the one
    /// before, and hashing a mode's name cost more than the rest of adding a timer.
    private var lastLookup: (mode: Loop.Mode, slot: ModeSlot)?
    var commonModes: Set<Loop.Mode> = [.default, .tracking]
    /// Items added to `.common`: they join every mode later added to the common set.
    /// With the sequence number of their joining, so that a mode added to the common set later
    /// receives them in that order (observers with equal `order` keep their tie order).
    var commonItems = Set<CommonItem>()
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
    /// Stale heap entries popped or compacted away (see `ModeItems.dropped`), released by the
    /// caller after the lock, as `garbage` is.
    var droppedEntries: [TimerHeap.Entry] = []

    /// Whether a change left anything for the caller to release after the lock.
    var hasGarbage: Bool { !garbage.isEmpty || !droppedEntries.isEmpty }

    /// Takes what changes dropped, for the caller to release after the lock.
    mutating func takeGarbage() -> ([TimerHeap], [TimerHeap.Entry]) {
        defer {
            garbage = []
            droppedEntries = []
        }
        return (garbage, droppedEntries)
    }

    /// Moves the entries the mode numbered `index` dropped to `droppedEntries`.
    @inline(__always)
    private mutating func collectDropped(_ index: Int) {
        guard !modes[index].dropped.isEmpty else { return }
        droppedEntries.append(contentsOf: modes[index].dropped)
        modes[index].dropped = []
    }

    init(version: TableVersion = TableVersion()) {
        self.version = version
    }

    mutating func sequence() -> UInt64 {
        nextSequence &+= 1
        return nextSequence
    }

    /// Runs `body` on `mode`'s tables in place, creating them if needed. Every change to a mode's
    /// tables goes through here, `withItems(in:)` or a removal (which bumps the version itself), so
    /// it counts as a change.
    mutating func withItems<R>(of mode: Loop.Mode, _ body: (inout ModeItems) -> R) -> R {
        withItems(in: slotCreating(mode), body)
    }

    /// Runs `body` on the tables of the mode numbered `slot`, in place.
    mutating func withItems<R>(in slot: ModeSlot, _ body: (inout ModeItems) -> R) -> R {
        version.bump()
        defer { collectDropped(Int(slot)) }
        return body(&modes[Int(slot)])
    }

    /// Runs `body` on `mode`'s tables if it has any, without counting it as a change: for
    /// dropping stale heap tops, which leaves the live tops as they were.
    mutating func withExistingItems<R>(of mode: Loop.Mode, _ body: (inout ModeItems) -> R) -> R? {
        guard let slot = slot(of: mode) else { return nil }
        defer { collectDropped(Int(slot)) }
        return body(&modes[Int(slot)])
    }

    /// Whether `mode` has tables (it has had an item).
    mutating func hasItems(of mode: Loop.Mode) -> Bool { slot(of: mode) != nil }

    /// `mode`'s number, if it has tables.
    @inline(__always)
    mutating func slot(of mode: Loop.Mode) -> ModeSlot? {
        // The check of the last look-up inline, the rest out of line: the call was a share of
        // adding a timer (docs/performance-notes.md#instructions-per-timer).
        if let last = lastLookup, last.mode == mode { return last.slot }
        return lookUpSlot(of: mode)
    }

    @inline(never)
    private mutating func lookUpSlot(of mode: Loop.Mode) -> ModeSlot? {
        guard let slot = slots[mode] else { return nil }
        lastLookup = (mode, slot)
        return slot
    }

    /// `mode`'s number, giving it one (and empty tables) if it has none.
    @inline(__always)
    private mutating func slotCreating(_ mode: Loop.Mode) -> ModeSlot {
        if let slot = slot(of: mode) { return slot }
        return createSlot(mode)
    }

    @inline(never)
    private mutating func createSlot(_ mode: Loop.Mode) -> ModeSlot {
        let slot = ModeSlot(modes.count)
        modes.append(ModeItems(mode: mode, slot: slot))
        slots[mode] = slot
        lastLookup = (mode, slot)
        return slot
    }

    /// Inserts `item` into one real mode. Returns false if it was already there.
    @discardableResult
    mutating func insert(_ item: some ModeMember, into mode: Loop.Mode) -> Bool {
        insert(item, into: mode) { item.join(&$0, sequence: $1) }
    }

    /// Inserts `item` into one real mode, `join` entering it into the mode's tables with a
    /// sequence number. Returns false if it was already there.
    @discardableResult
    @inline(__always)
    private mutating func insert(
        _ item: some ModeMember, into mode: Loop.Mode, joining join: (inout ModeItems, UInt64) -> Void
    ) -> Bool {
        let slot = slotCreating(mode)
        guard !item.membership.modes.contains(slot) else { return false }
        item.membership.modes.append(slot)
        let sequence = sequence()
        withItems(in: slot) { join(&$0, sequence) }
        return true
    }

    /// Removes `item` from one real mode. Returns false if it was not there.
    @discardableResult
    mutating func remove(_ item: some ModeMember, from mode: Loop.Mode) -> Bool {
        guard let slot = slot(of: mode) else { return false }
        return remove(item, fromSlot: slot)
    }

    @discardableResult
    private mutating func remove(_ item: some ModeMember, fromSlot slot: ModeSlot) -> Bool {
        guard item.membership.modes.remove(slot) else { return false }
        version.bump()
        item.leave(&modes[Int(slot)], garbage: &garbage)
        collectDropped(Int(slot))
        return true
    }

    /// Adds `item` to `mode`, where `.common` means the common set; `join` enters it into each
    /// mode's tables (`ModeMember.join`, or a timer joining with the schedule read as it was bound).
    @inline(__always)
    mutating func add<Item: ModeMember>(
        _ item: Item, forMode mode: Loop.Mode, joining join: (inout ModeItems, UInt64) -> Void
    ) {
        guard mode.isCommonSet else {
            insert(item, into: mode, joining: join)
            return
        }
        guard !item.membership.isCommon else { return }
        item.membership.isCommon = true
        commonItems.insert(CommonItem(item, joined: sequence()))
        for common in commonModes {
            insert(item, into: common, joining: join)
        }
    }

    /// Removes `item` from `mode`, where `.common` means every mode of the common set.
    mutating func remove(_ item: some ModeMember, forMode mode: Loop.Mode) {
        guard mode.isCommonSet else {
            remove(item, from: mode)
            return
        }
        guard item.membership.isCommon else { return }
        item.membership.isCommon = false
        commonItems.remove(CommonItem(item))
        for common in commonModes {
            remove(item, from: common)
        }
    }

    /// Removes `item` from every mode and from the common set.
    mutating func removeEverywhere(_ item: some ModeMember) {
        if item.membership.isCommon {
            item.membership.isCommon = false
            commonItems.remove(CommonItem(item))
        }
        // Most items are in one mode: no iterator over a copy of the list.
        if let only = item.membership.modes.single {
            remove(item, fromSlot: only)
            return
        }
        for slot in item.membership.modes {
            remove(item, fromSlot: slot)
        }
    }

    /// Adds `mode` to the common set, with every item of `.common`, in the order they joined it.
    mutating func addCommonMode(_ mode: Loop.Mode) {
        guard commonModes.insert(mode).inserted else { return }
        version.bump()
        for item in commonItems.sorted(by: { $0.joined < $1.joined }).map(\.item) {
            insert(item, into: mode)
        }
    }

    mutating func contains(_ item: some ModeMember, in mode: Loop.Mode) -> Bool {
        if mode.isCommonSet { return item.membership.isCommon }
        guard let slot = slot(of: mode) else { return false }
        return item.membership.modes.contains(slot)
    }

    /// Every item in any mode or in the common set.
    func allItems() -> [any ModeMember] {
        var seen = [ObjectIdentifier: any ModeMember](
            uniqueKeysWithValues: commonItems.map { (ObjectIdentifier($0.object), $0.item) })
        for items in modes {
            for timer in items.timers { seen[ObjectIdentifier(timer)] = timer }
            for observer in items.observers.all {
                seen[ObjectIdentifier(observer)] = observer
            }
            for source in items.sources { seen[ObjectIdentifier(source)] = source }
            for source in items.descriptors { seen[ObjectIdentifier(source)] = source }
        }
        return Array(seen.values)
    }
}

/// An item added to `.common`, in `ModeTable.commonItems`: equal and hashed by identity, and held
/// as a plain object, so that the set stores two words per item where a dictionary keyed by
/// `ObjectIdentifier` of `any ModeMember` stored four (a server holds one per connection). The
/// item is cast back to `ModeMember` only when a mode joins the common set and at teardown.
struct CommonItem: Hashable {
    let object: AnyObject
    /// When it joined `.common` (`ModeTable.sequence()`).
    let joined: UInt64

    /// With `joined` 0: to find the item's entry, which equality finds by identity alone.
    init(_ item: any ModeMember, joined: UInt64 = 0) {
        self.object = item
        self.joined = joined
    }

    var item: any ModeMember { object as! any ModeMember }

    static func == (lhs: CommonItem, rhs: CommonItem) -> Bool { lhs.object === rhs.object }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(object)) }
}
