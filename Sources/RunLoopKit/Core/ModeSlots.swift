/// An item a mode keeps in a `ModeSlots`: a custom source or a descriptor source.
protocol SlottedItem: AnyObject {
    /// Its index in each mode's array; guarded by its loop's `state` lock.
    var positions: ModePositions<UInt32> { get set }
}

/// A mode's custom sources or descriptor sources, in no particular order, each added and removed
/// in O(1) with no hashing, touching no other item: an item records its index per mode
/// (`SlottedItem.positions`) and leaves a hole (nil) behind, which the next item added fills.
/// Moving the last item into the hole, as this did before, wrote that item's index: a cache miss
/// on an unrelated object per removal, the largest share of removing sources in random order
/// (`runloop-bench --filter scale`). So the array never holds more entries than the mode held
/// items at its fullest (as its capacity did before). The holes are squeezed out only before a
/// walk (`squeezeIfSparse`), which visits every entry anyway; emptying the array when the last
/// item left walked every entry too, to destroy it. Guarded by the loop's `state` lock.
struct ModeSlots<Item: SlottedItem>: Sequence {
    /// The items, with holes; shared with a `ModeView` for a walk (copy on write).
    private(set) var entries: [Item?] = []
    /// The holes' indices, the next to fill last.
    private var holes: [UInt32] = []

    /// How many items, holes not counted.
    var count: Int { entries.count &- holes.count }

    var isEmpty: Bool { entries.count == holes.count }

    /// Enters `item`, in the last hole left if there is one; it is not in the mode numbered `slot`
    /// yet.
    @inline(__always)
    mutating func insert(_ item: Item, in slot: ModeSlot) {
        if let hole = holes.popLast() {
            item.positions[slot] = hole
            entries[Int(hole)] = item
        } else {
            item.positions[slot] = UInt32(truncatingIfNeeded: entries.count)
            entries.append(item)
        }
    }

    /// Takes `item` out of the mode numbered `slot`, leaving a hole.
    @inline(__always)
    mutating func remove(_ item: Item, from slot: ModeSlot) {
        let index = item.positions.remove(slot)
        assert(entries[Int(index)] === item, "RunLoopKit: an item missing from its mode")
        entries[Int(index)] = nil
        holes.append(index)
    }

    /// Squeezes the holes out if they are more than half of the entries, recording the items' new
    /// indices, before a walk: amortised by the walks, which are as long. No allocation.
    mutating func squeezeIfSparse(_ slot: ModeSlot) {
        guard holes.count > count &+ 16 else { return }
        var kept = 0
        for index in entries.indices where entries[index] != nil {
            if index != kept {
                entries.swapAt(kept, index)
                entries[kept]!.positions[slot] = UInt32(truncatingIfNeeded: kept)
            }
            kept += 1
        }
        entries.removeLast(entries.count - kept)
        holes.removeAll(keepingCapacity: true)
    }

    /// The items, holes skipped.
    func makeIterator() -> some IteratorProtocol<Item> { entries.lazy.compactMap { $0 }.makeIterator() }
}
