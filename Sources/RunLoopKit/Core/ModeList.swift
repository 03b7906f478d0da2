/// A short list of distinct modes, the first two stored inline: almost every item is in one mode
/// or in the two default common modes, and adding a timer should not allocate an array for that.
struct ModeList: Sequence {
    private var first: Loop.Mode?
    private var second: Loop.Mode?
    private var others: [Loop.Mode] = []

    var isEmpty: Bool { first == nil }

    /// Whether `mode` is the first of the list (the oldest).
    func startsWith(_ mode: Loop.Mode) -> Bool { first == mode }

    /// The mode, if the list holds exactly one.
    var single: Loop.Mode? { second == nil ? first : nil }

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
    /// A timer's tracked heap entry (see `TickHeap`), in the exact heap of its first mode: its
    /// index, or -1.
    var trackedEntry = -1

    var isEmpty: Bool { modes.isEmpty && !isCommon }

    /// Out of every mode (the loop's teardown); the keeper stays, emptied by `updateKeeper`.
    mutating func leaveEveryMode() {
        modes = ModeList()
        isCommon = false
        trackedEntry = -1
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
