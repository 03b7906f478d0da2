/// A mode's number in its loop's tables (`ModeTable`): given when the loop first sees the mode,
/// never reused. Items record their modes by number: comparing and copying a `Loop.Mode` (a
/// string and its hash) was a large share of adding and removing a timer, and a number is smaller
/// (docs/performance-notes.md#instructions-per-timer).
typealias ModeSlot = UInt32

/// A short list of distinct modes, the first two stored inline: almost every item is in one mode
/// or in the two default common modes, and adding a timer should not allocate an array for that.
struct ModeList: Sequence {
    private static let none = ModeSlot.max
    private var first = ModeList.none
    private var second = ModeList.none
    private var others: [ModeSlot] = []

    var isEmpty: Bool { first == ModeList.none }

    /// Whether `mode` is the first of the list (the oldest).
    func startsWith(_ mode: ModeSlot) -> Bool { first == mode }

    /// The mode, if the list holds exactly one.
    var single: ModeSlot? { second == ModeList.none && first != ModeList.none ? first : nil }

    func contains(_ mode: ModeSlot) -> Bool {
        first == mode || second == mode || (!others.isEmpty && others.contains(mode))
    }

    /// Appends `mode`; the caller checks it is not there yet.
    mutating func append(_ mode: ModeSlot) {
        if first == ModeList.none {
            first = mode
        } else if second == ModeList.none {
            second = mode
        } else {
            others.append(mode)
        }
    }

    /// Removes `mode`; returns false if it was not there.
    @inline(__always)
    mutating func remove(_ mode: ModeSlot) -> Bool {
        // Inline for the usual list of one (docs/performance-notes.md#instructions-per-timer).
        guard first == mode, second == ModeList.none else { return removeFromLongerList(mode) }
        first = ModeList.none
        return true
    }

    private mutating func removeFromLongerList(_ mode: ModeSlot) -> Bool {
        if first == mode {
            first = second
            second = others.isEmpty ? ModeList.none : others.removeFirst()
        } else if second == mode {
            second = others.isEmpty ? ModeList.none : others.removeFirst()
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

        mutating func next() -> ModeSlot? {
            defer { index += 1 }
            switch index {
            case 0: return list.first == ModeList.none ? nil : list.first
            case 1: return list.second == ModeList.none ? nil : list.second
            default: return index - 2 < list.others.count ? list.others[index - 2] : nil
            }
        }
    }

    func makeIterator() -> Iterator { Iterator(list: self) }
}

/// A number per mode for an item, by mode number, the first two inline and the rest in a short
/// array (no dictionary: an item is in a few modes): where a source sits in each mode's array
/// (`ModeSlots`), or an observer's sort key there. Guarded by the owning loop's `state` lock.
struct ModePositions<Value: FixedWidthInteger> {
    private var firstSlot = ModeSlot.max
    private var secondSlot = ModeSlot.max
    private var firstValue: Value = 0
    private var secondValue: Value = 0
    private var others: [(slot: ModeSlot, value: Value)] = []

    /// The number recorded for `slot`; the caller recorded one.
    subscript(slot: ModeSlot) -> Value {
        @inline(__always) get {
            if firstSlot == slot { return firstValue }
            if secondSlot == slot { return secondValue }
            return others[otherIndex(slot)!].value
        }
        @inline(__always) set {
            if firstSlot == slot {
                firstValue = newValue
            } else if secondSlot == slot {
                secondValue = newValue
            } else {
                setOther(slot, newValue)
            }
        }
    }

    private mutating func setOther(_ slot: ModeSlot, _ value: Value) {
        if let index = otherIndex(slot) {
            others[index].value = value
        } else if firstSlot == .max {
            (firstSlot, firstValue) = (slot, value)
        } else if secondSlot == .max {
            (secondSlot, secondValue) = (slot, value)
        } else {
            others.append((slot, value))
        }
    }

    private func otherIndex(_ slot: ModeSlot) -> Int? {
        others.isEmpty ? nil : others.firstIndex { $0.slot == slot }
    }

    /// Forgets `slot`'s number and returns it.
    @inline(__always)
    mutating func remove(_ slot: ModeSlot) -> Value {
        if firstSlot == slot {
            firstSlot = .max
            return firstValue
        }
        if secondSlot == slot {
            secondSlot = .max
            return secondValue
        }
        return others.remove(at: otherIndex(slot)!).value
    }
}

/// The modes of its loop an item is in. Guarded by the owning loop's `state` lock.
struct Membership {
    var modes = ModeList()
    /// Added to `.common` (so it joins modes added to the common set later).
    var isCommon = false
    /// Set for items that serve a public object of their own (a signal source's descriptor source,
    /// a frame link's timer): keeps that object alive while the item is in a mode.
    var keeper: ItemKeeper?
    /// A timer's tracked heap entries (see `TickHeap`) in its first mode, their indices or -1:
    /// in the exact heap or the one by fire date, and in the one by latest fire time. 32 bits
    /// each, so that both take the room one took.
    var trackedEntry: Int32 = -1
    var trackedLatest: Int32 = -1

    var isEmpty: Bool { modes.isEmpty && !isCommon }

    /// Out of every mode (the loop's teardown); the keeper stays, emptied by `updateKeeper`.
    mutating func leaveEveryMode() {
        modes = ModeList()
        isCommon = false
        trackedEntry = -1
        trackedLatest = -1
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
