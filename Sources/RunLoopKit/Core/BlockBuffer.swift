import Glibc

/// A growable run of blocks in storage the loop manages itself, for the cross-thread hot path.
///
/// An `Array` costs every append a uniqueness check and a capacity check on its header, and
/// every emptying a destroy pass over elements that were already moved out. Here an append is
/// an initialize at `count`; the loop moves each block out as it runs it and forgets the
/// count. Three buffers take turns (the inbox, the pending blocks, a spare), so a steady stream
/// of posts allocates nothing. Whoever holds a buffer owns it: the inbox's under the inbox
/// lock, the others on the loop thread only.
final class BlockBuffer {
    // Owned by one thread at a time (see above): no dynamic exclusivity checks per access.
    @exclusivity(unchecked) private var base: UnsafeMutablePointer<LoopBlock>
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private(set) var capacity: Int

    /// Buffers grown beyond this many blocks by a burst are not kept for reuse: their memory
    /// goes back instead of staying with the loop for good.
    static let retainedCapacity = 1 << 16

    /// The capacity of a buffer's first storage.
    static let firstCapacity = 16

    /// A buffer with no storage until its first append (`capacity` 0), or with room for
    /// `capacity` blocks. Of the four buffers a loop keeps, an idle loop fills at most one: the
    /// others allocate nothing (640 bytes each at 16 blocks).
    init(capacity: Int = 0) {
        self.capacity = capacity
        base = capacity > 0 ? BlockBuffer.reallocate(nil, capacity: capacity) : BlockBuffer.noStorage
    }

    deinit {
        // Blocks never run (the loop's thread exited): their closures are released here.
        base.deinitialize(count: count)
        if capacity > 0 { free(base) }
    }

    /// Where a buffer without storage points: aligned, never read or written (its count is 0).
    private static var noStorage: UnsafeMutablePointer<LoopBlock> {
        UnsafeMutablePointer(bitPattern: MemoryLayout<LoopBlock>.alignment)!
    }

    /// `malloc`/`realloc`: a large buffer grows by remapping its pages (`mremap`), not by
    /// copying them. Moving blocks bitwise is sound: a block holds a closure, an optional
    /// array and integers, all of which Swift moves bitwise (nothing in it is registered by
    /// address, as a weak reference would be).
    private static func reallocate(_ old: UnsafeMutablePointer<LoopBlock>?, capacity: Int) -> UnsafeMutablePointer<
        LoopBlock
    > {
        let (bytes, overflow) = capacity.multipliedReportingOverflow(by: MemoryLayout<LoopBlock>.stride)
        guard !overflow, let raw = realloc(old, bytes) else {
            fatalError("RunLoopKit: out of memory for \(capacity) posted blocks")
        }
        return raw.bindMemory(to: LoopBlock.self, capacity: capacity)
    }

    var isEmpty: Bool { count == 0 }

    @inline(__always)
    func append(_ block: consuming LoopBlock) {
        if count == capacity { grow(to: max(capacity * 2, BlockBuffer.firstCapacity)) }
        (base + count).initialize(to: block)
        count += 1
    }

    /// Appends `block` to run only in `modes`: a slot holding them, then the block (nil: the
    /// common modes, the block alone). The two slots stay together through every move.
    @inline(__always)
    func append(_ block: consuming LoopBlock, modes: consuming [Loop.Mode]?) {
        guard let modes else { return append(block) }
        if count + 2 > capacity { grow(to: max(capacity * 2, count + 2, BlockBuffer.firstCapacity)) }
        (base + count).initialize(to: LoopBlock(.modesOfNext(modes)))
        (base + count + 1).initialize(to: block)
        count += 2
    }

    /// Moves every block of `other` to the end of this buffer, leaving `other` empty.
    func append(movingFrom other: BlockBuffer) {
        guard other.count > 0 else { return }
        if count + other.count > capacity {
            grow(to: max(capacity * 2, count + other.count, BlockBuffer.firstCapacity))
        }
        (base + count).moveInitialize(from: other.base, count: other.count)
        count += other.count
        other.count = 0
    }

    @inline(never)
    private func grow(to newCapacity: Int) {
        base = BlockBuffer.reallocate(capacity > 0 ? base : nil, capacity: newCapacity)
        capacity = newCapacity
    }

    /// Trades storage with `other`: blocks, count and capacity.
    ///
    /// The holders keep their buffer objects for good and trade what is in them: a buffer held
    /// in a `let` is reached without a retain and a release, which on the posting path are two
    /// atomic operations inside the inbox's lock on an object the loop thread also touches.
    @inline(__always)
    func exchange(with other: BlockBuffer) {
        swap(&base, &other.base)
        swap(&count, &other.count)
        swap(&capacity, &other.capacity)
    }

    /// Gives the storage of an empty buffer back (a burst grew it beyond what the loop keeps).
    func releaseStorage() {
        precondition(count == 0, "RunLoopKit: releasing the storage of a block buffer that holds blocks")
        if capacity > 0 { free(base) }
        base = BlockBuffer.noStorage
        capacity = 0
    }

    /// Whether the block starting at slot `index` satisfies `predicate`, given its modes (nil:
    /// the common modes), and how many slots it spans: two after a `modesOfNext` slot.
    @inline(__always)
    private func test(at index: Int, _ predicate: (_ modes: [Loop.Mode]?) -> Bool) -> (satisfied: Bool, slots: Int) {
        switch base[index].body {
        case .closure, .job, .taken: (predicate(nil), 1)
        case .modesOfNext(let modes): (predicate(modes), 2)
        case .scheduled(let handle): (predicate(handle.modes), 1)
        }
    }

    /// Whether the modes of any block satisfy `predicate`, without copying a block.
    func contains(where predicate: (_ modes: [Loop.Mode]?) -> Bool) -> Bool {
        var index = 0
        while index < count {
            let (satisfied, slots) = test(at: index, predicate)
            if satisfied { return true }
            index += slots
        }
        return false
    }

    /// Whether the modes of every block satisfy `predicate`.
    func allSatisfy(_ predicate: (_ modes: [Loop.Mode]?) -> Bool) -> Bool {
        var index = 0
        while index < count {
            let (satisfied, slots) = test(at: index, predicate)
            if !satisfied { return false }
            index += slots
        }
        return true
    }

    /// Moves the blocks whose modes satisfy `predicate` to the end of `other`, keeping the others
    /// here; both keep their order, and a block's modes slot goes with it.
    func move(where predicate: (_ modes: [Loop.Mode]?) -> Bool, to other: BlockBuffer) {
        var kept = 0
        var index = 0
        while index < count {
            let (satisfied, slots) = test(at: index, predicate)
            if satisfied {
                for slot in index..<index + slots { other.append((base + slot).move()) }
            } else {
                if kept != index { (base + kept).moveInitialize(from: base + index, count: slots) }
                kept += slots
            }
            index += slots
        }
        count = kept
    }

    /// Counts the buffer empty and returns the blocks it held, still initialized: the caller
    /// moves out or deinitializes each of them (a block whose body was taken holds no reference,
    /// and may be left as it is).
    ///
    /// The buffer must not be reachable from anything that runs before the caller is done
    /// with them (a callout might otherwise append over blocks not yet taken).
    func takeAll() -> UnsafeMutableBufferPointer<LoopBlock> {
        defer { count = 0 }
        return UnsafeMutableBufferPointer(start: base, count: count)
    }
}
