/// A mode's timers in a heap (see `TickHeap`).
typealias TimerHeap = TickHeap<LoopTimer>

extension TickHeap.Entry where Element == LoopTimer {
    var timer: LoopTimer { element }
}

/// A binary min-heap of entries keyed by a time, ties broken by insertion sequence: a mode's
/// timers, a loop's scheduled blocks.
///
/// Entries are never removed from the middle: rescheduling a timer bumps its generation and
/// pushes a new entry, and the old one is recognised as stale when it reaches the top. That keeps
/// scheduling O(log n) and removal O(1); `compact` bounds the garbage.
struct TickHeap<Element: AnyObject> {
    struct Entry {
        var key: Ticks
        var sequence: UInt64
        var generation: UInt64
        var element: Element

        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            key < other.key || (key == other.key && sequence < other.sequence)
        }
    }

    private(set) var entries: [Entry] = []

    var count: Int { entries.count }
    var top: Entry? { entries.first }

    mutating func push(_ key: Ticks, _ sequence: UInt64, _ element: Element, _ generation: UInt64 = 0) {
        entries.append(Entry(key: key, sequence: sequence, generation: generation, element: element))
        siftUp(entries.count - 1)
    }

    @discardableResult
    mutating func pop() -> Entry? {
        guard !entries.isEmpty else { return nil }
        let last = entries.removeLast()
        guard !entries.isEmpty else { return last }
        // Swap the last entry into the root (a move, not a copy), then restore the order.
        var first = last
        swap(&first, &entries[0])
        siftDown(0)
        return first
    }

    /// Drops every entry for which `isLive` is false, in O(n).
    mutating func compact(keeping isLive: (Entry) -> Bool) {
        entries.removeAll { !isLive($0) }
        // Floyd's heap construction.
        var index = entries.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    // The sifts move entries bitwise through a hole instead of assigning them: an assignment would
    // retain and release an element per level, which dominated firing large numbers of timers.

    private mutating func siftUp(_ start: Int) {
        entries.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            var child = start
            let moving = (base + child).move()
            while child > 0 {
                let parent = (child - 1) / 2
                guard moving.precedes(base[parent]) else { break }
                (base + child).moveInitialize(from: base + parent, count: 1)
                child = parent
            }
            (base + child).initialize(to: moving)
        }
    }

    private mutating func siftDown(_ start: Int) {
        entries.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            let count = buffer.count
            var parent = start
            let moving = (base + parent).move()
            while true {
                let left = 2 * parent + 1
                guard left < count else { break }
                let right = left + 1
                let child = right < count && base[right].precedes(base[left]) ? right : left
                guard base[child].precedes(moving) else { break }
                (base + parent).moveInitialize(from: base + child, count: 1)
                parent = child
            }
            (base + parent).initialize(to: moving)
        }
    }
}
