/// A mode's timers in a heap (see `TickHeap`).
typealias TimerHeap = TickHeap<LoopTimer>

extension TickHeap.Entry where Element == LoopTimer {
    var timer: LoopTimer { element }
}

/// An element of a `TickHeap` that may have tracked entries, one per track: the heap tells it
/// where each is whenever it moves, so that it can be updated or removed in place.
protocol TickHeapElement: AnyObject {
    /// The element's tracked entry of `track` moved to `index`, or left the heap (-1). Called
    /// under whatever guards the heap.
    func trackedEntryMoved(to index: Int, as track: TickHeapTrack)
}

/// Whether a heap entry is tracked, and which of its element's positions it updates: a tolerant
/// timer has one tracked entry in each of two heaps of its first mode (by fire date and by latest
/// fire time), an exact timer one (`ModeItems`).
enum TickHeapTrack: UInt8 {
    case none, first, second
}

/// A binary min-heap of entries keyed by a time, ties broken by insertion sequence: a mode's
/// timers, a loop's scheduled blocks.
///
/// Entries are mostly not removed from the middle: rescheduling a timer bumps its generation and
/// pushes a new entry, and the old one is recognised as stale when it reaches the top. That keeps
/// scheduling O(log n) and removal O(1); `compact` bounds the garbage. A tracked entry (a timer's
/// entries in its first mode) is the exception: its element knows its index, so it is updated
/// and removed in place, as libevent's timer heap does, and leaves no garbage: invalidated timers
/// piling up as stale entries cost compactions and freed their memory in batches, which emptied
/// malloc's per-thread cache (docs/performance-notes.md#instructions-per-timer).
struct TickHeap<Element: TickHeapElement> {
    struct Entry {
        var key: Ticks
        var sequence: UInt64
        var generation: UInt64
        var element: Element
        /// Whether the element is told where this entry is, and as which (see `TickHeapElement`).
        var tracked = TickHeapTrack.none

        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            key < other.key || (key == other.key && sequence < other.sequence)
        }
    }

    private(set) var entries: [Entry] = []

    var count: Int { entries.count }
    var top: Entry? { entries.first }

    /// The top entry's key and element, read in place: `top` copies the entry, a retain and a
    /// release of its element (four atomic operations of each `schedule(after:)` and `cancel()`,
    /// which publish the top after every change).
    var topKey: Ticks? { entries.isEmpty ? nil : entries[0].key }

    /// Whether `element` is the top entry's element.
    func isTop(_ element: Element) -> Bool { !entries.isEmpty && entries[0].element === element }

    /// `read` applied to the top entry's element in place, or nil if the heap is empty.
    func readTopElement<R>(_ read: (Element) -> R) -> R? { entries.isEmpty ? nil : read(entries[0].element) }

    mutating func push(
        _ key: Ticks, _ sequence: UInt64, _ element: Element, _ generation: UInt64 = 0,
        tracked: TickHeapTrack = .none
    ) {
        entries.append(Entry(key: key, sequence: sequence, generation: generation, element: element, tracked: tracked))
        siftUp(entries.count - 1)
    }

    @discardableResult
    mutating func pop() -> Entry? {
        guard !entries.isEmpty else { return nil }
        let last = entries.removeLast()
        guard !entries.isEmpty else { return left(last) }
        // Swap the last entry into the root (a move, not a copy), then restore the order.
        var first = last
        swap(&first, &entries[0])
        siftDown(0)
        return left(first)
    }

    /// Whether the entry at `index` is `element`'s tracked entry of `track`.
    @inline(__always)
    func isTrackedEntry(at index: Int, of element: Element, as track: TickHeapTrack = .first) -> Bool {
        index >= 0 && index < entries.count && entries[index].tracked == track && entries[index].element === element
    }

    /// Gives the entry at `index` a new key, sequence and generation, and restores the order.
    mutating func update(at index: Int, key: Ticks, sequence: UInt64, generation: UInt64) {
        entries[index].key = key
        entries[index].sequence = sequence
        entries[index].generation = generation
        siftUp(index)
        siftDown(index)
    }

    /// Removes the entry at `index` (the caller holds another reference to its element: its
    /// release here is never the last).
    mutating func remove(at index: Int) {
        let last = entries.count - 1
        if index != last {
            // Swapped bitwise (the array's own `swapAt` retains and releases both elements), then
            // the entry moved into the hole goes up or down, not both, among the entries before
            // the removed one: one access to the buffer for both
            // (docs/performance-notes.md#instructions-per-timer).
            entries.withUnsafeMutableBufferPointer { buffer in
                buffer.swapAt(index, last)
                let base = buffer.baseAddress!
                if index > 0, base[index].precedes(base[(index - 1) / 2]) {
                    TickHeap.siftUp(base, from: index)
                } else {
                    TickHeap.siftDown(base, count: last, from: index)
                }
            }
        }
        // Taken before the call: `left(entries.removeLast())` loads `self` for `left` first, and
        // that second reference to the array made `removeLast` copy all of it (debug builds:
        // removing 20,000 timers took 2.4 s, 5,000 took 0.14 s).
        let removed = entries.removeLast()
        _ = left(removed)
    }

    /// Drops every entry for which `isLive` is false, in O(n), appending them to `dropped` (the
    /// caller releases them where it may).
    mutating func compact(dropping dropped: inout [Entry], keeping isLive: (Entry) -> Bool) {
        // By hand, swapping bitwise: `removeAll(where:)` retained and released the element of
        // every entry it moved (docs/performance-notes.md#instructions-per-timer).
        let kept = entries.withUnsafeMutableBufferPointer { buffer in
            var kept = 0
            for index in buffer.indices where isLive(buffer[index]) {
                if index != kept { buffer.swapAt(kept, index) }
                kept += 1
            }
            for index in kept..<buffer.count where buffer[index].tracked != .none {
                buffer[index].element.trackedEntryMoved(to: -1, as: buffer[index].tracked)
            }
            return kept
        }
        dropped.append(contentsOf: entries[kept...])
        entries.removeSubrange(kept...)
        // Floyd's heap construction.
        var index = entries.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
        for index in entries.indices where entries[index].tracked != .none {
            entries[index].element.trackedEntryMoved(to: index, as: entries[index].tracked)
        }
    }

    /// Tells the element of an entry leaving the heap, if tracked.
    @inline(__always)
    private func left(_ entry: Entry) -> Entry {
        if entry.tracked != .none { entry.element.trackedEntryMoved(to: -1, as: entry.tracked) }
        return entry
    }

    // The sifts move entries bitwise through a hole instead of assigning them: an assignment would
    // retain and release an element per level, which dominated firing large numbers of timers.

    private mutating func siftUp(_ start: Int) {
        entries.withUnsafeMutableBufferPointer { TickHeap.siftUp($0.baseAddress!, from: start) }
    }

    private mutating func siftDown(_ start: Int) {
        entries.withUnsafeMutableBufferPointer { TickHeap.siftDown($0.baseAddress!, count: $0.count, from: start) }
    }

    private static func siftUp(_ base: UnsafeMutablePointer<Entry>, from start: Int) {
        var child = start
        let moving = (base + child).move()
        while child > 0 {
            let parent = (child - 1) / 2
            guard moving.precedes(base[parent]) else { break }
            (base + child).moveInitialize(from: base + parent, count: 1)
            placed(base, child)
            child = parent
        }
        placed(moving, at: child)
        (base + child).initialize(to: consume moving)
    }

    /// Sifts the entry at `start` down among the first `count` entries.
    private static func siftDown(_ base: UnsafeMutablePointer<Entry>, count: Int, from start: Int) {
        var parent = start
        let moving = (base + parent).move()
        while true {
            let left = 2 * parent + 1
            guard left < count else { break }
            let right = left + 1
            let child = right < count && base[right].precedes(base[left]) ? right : left
            guard base[child].precedes(moving) else { break }
            (base + parent).moveInitialize(from: base + child, count: 1)
            placed(base, parent)
            parent = child
        }
        placed(moving, at: parent)
        (base + parent).initialize(to: consume moving)
    }

    @inline(__always)
    private static func placed(_ base: UnsafeMutablePointer<Entry>, _ index: Int) {
        let track = base[index].tracked
        guard track != .none else { return }
        // The heap's reference is borrowed: called on `base[index].element` directly, the call
        // retained and released the element, an atomic pair per level of a sift.
        Unmanaged.passUnretained(base[index].element)._withUnsafeGuaranteedRef {
            $0.trackedEntryMoved(to: index, as: track)
        }
    }

    /// `placed` for the entry a sift carries, told before it is stored (told after, through the
    /// buffer, its element was retained and released around the call).
    @inline(__always)
    private static func placed(_ entry: borrowing Entry, at index: Int) {
        if entry.tracked != .none { entry.element.trackedEntryMoved(to: index, as: entry.tracked) }
    }
}
