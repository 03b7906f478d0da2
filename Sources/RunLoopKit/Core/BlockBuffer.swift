import Glibc

/// A growable run of blocks in storage the loop manages itself, for the cross-thread hot path.
///
/// An `Array` costs every append a uniqueness check and a capacity check on its header, and
/// every emptying a destroy pass over elements that were already moved out. Here an append is
/// an initialize at `count`; the loop moves each block out as it runs it and forgets the
/// count. Three buffers take turns (the inbox, the pending blocks, a spare), so a steady stream
/// of posts allocates nothing. Whoever holds a buffer owns it: the inbox's under the inbox
/// lock, the others on the loop thread only (checked in debug builds).
final class BlockBuffer {
    /// Where the blocks are, how many, and room for how many.
    private struct Storage {
        var base: UnsafeMutablePointer<LoopBlock>
        var count = 0
        var capacity: Int
    }

    /// Owned by one thread at a time (see above): no dynamic exclusivity checks per access.
    /// Reached through `storage`, which checks the owner's thread.
    @exclusivity(unchecked) private var uncheckedStorage: Storage
    #if DEBUG
        /// The link of the loop whose thread alone may touch the buffer; nil for the inbox's,
        /// which its lock guards instead.
        private let owner: LoopLink?
    #endif

    /// The storage. On the owning loop's thread only, for a buffer that has one (checked in debug
    /// builds; release builds reach the fields directly).
    private var storage: Storage {
        @inline(__always) _read {
            assertOwnerThread()
            yield uncheckedStorage
        }
        @inline(__always) _modify {
            assertOwnerThread()
            yield &uncheckedStorage
        }
    }

    @inline(__always)
    private func assertOwnerThread() {
        #if DEBUG
            assert(owner?.isLoopThread ?? true, "RunLoopKit: BlockBuffer's blocks touched off its loop's thread")
        #endif
    }

    var count: Int { storage.count }
    var capacity: Int { storage.capacity }

    /// Buffers grown beyond this many blocks by a burst are not kept for reuse: their memory
    /// goes back instead of staying with the loop for good.
    static let retainedCapacity = 1 << 16

    /// The capacity of a buffer's first storage.
    static let firstCapacity = 16

    /// A buffer with no storage until its first append (`capacity` 0), or with room for
    /// `capacity` blocks. Of the four buffers a loop keeps, an idle loop fills at most one: the
    /// others allocate nothing (640 bytes each at 16 blocks). With `owner`, only the thread of
    /// that link's loop may touch it; without, whoever holds the buffer guards it with a lock.
    init(capacity: Int = 0, owner: LoopLink? = nil) {
        uncheckedStorage = Storage(
            base: capacity > 0 ? BlockBuffer.reallocate(nil, capacity: capacity) : BlockBuffer.noStorage,
            capacity: capacity)
        #if DEBUG
            self.owner = owner
        #endif
    }

    deinit {
        // Blocks never run (the loop's thread exited): their closures are released here, on
        // whichever thread lets go of the buffer last.
        uncheckedStorage.base.deinitialize(count: uncheckedStorage.count)
        if uncheckedStorage.capacity > 0 { free(uncheckedStorage.base) }
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
        if storage.count == storage.capacity { grow(to: max(storage.capacity * 2, BlockBuffer.firstCapacity)) }
        (storage.base + storage.count).initialize(to: block)
        storage.count += 1
    }

    /// Appends `block` to run only in `modes`: a slot holding them, then the block (nil: the
    /// common modes, the block alone). The two slots stay together through every move.
    @inline(__always)
    func append(_ block: consuming LoopBlock, modes: consuming [Loop.Mode]?) {
        guard let modes else { return append(block) }
        let (count, capacity) = (storage.count, storage.capacity)
        if count + 2 > capacity { grow(to: max(capacity * 2, count + 2, BlockBuffer.firstCapacity)) }
        (storage.base + count).initialize(to: LoopBlock(.modesOfNext(modes)))
        (storage.base + count + 1).initialize(to: block)
        storage.count = count + 2
    }

    /// Moves every block of `other` to the end of this buffer, leaving `other` empty.
    func append(movingFrom other: BlockBuffer) {
        let moved = other.storage.count
        guard moved > 0 else { return }
        let (count, capacity) = (storage.count, storage.capacity)
        if count + moved > capacity {
            grow(to: max(capacity * 2, count + moved, BlockBuffer.firstCapacity))
        }
        (storage.base + count).moveInitialize(from: other.storage.base, count: moved)
        storage.count = count + moved
        other.storage.count = 0
    }

    @inline(never)
    private func grow(to newCapacity: Int) {
        storage.base = BlockBuffer.reallocate(storage.capacity > 0 ? storage.base : nil, capacity: newCapacity)
        storage.capacity = newCapacity
    }

    /// Trades storage with `other`: blocks, count and capacity.
    ///
    /// The holders keep their buffer objects for good and trade what is in them: a buffer held
    /// in a `let` is reached without a retain and a release, which on the posting path are two
    /// atomic operations inside the inbox's lock on an object the loop thread also touches.
    @inline(__always)
    func exchange(with other: BlockBuffer) {
        swap(&storage, &other.storage)
    }

    /// Gives the storage of an empty buffer back (a burst grew it beyond what the loop keeps).
    func releaseStorage() {
        precondition(storage.count == 0, "RunLoopKit: releasing the storage of a block buffer that holds blocks")
        if storage.capacity > 0 { free(storage.base) }
        storage = Storage(base: BlockBuffer.noStorage, capacity: 0)
    }

    /// Whether the block starting at slot `index` satisfies `predicate`, given its modes (nil:
    /// the common modes), and how many slots it spans: two after a `modesOfNext` slot.
    @inline(__always)
    private func test(at index: Int, _ predicate: (_ modes: [Loop.Mode]?) -> Bool) -> (satisfied: Bool, slots: Int) {
        switch storage.base[index].body {
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
        let base = storage.base
        var kept = 0
        var index = 0
        while index < storage.count {
            let (satisfied, slots) = test(at: index, predicate)
            if satisfied {
                for slot in index..<index + slots { other.append((base + slot).move()) }
            } else {
                if kept != index { (base + kept).moveInitialize(from: base + index, count: slots) }
                kept += slots
            }
            index += slots
        }
        storage.count = kept
    }

    /// Counts the buffer empty and returns the blocks it held, still initialized: the caller
    /// moves out or deinitializes each of them (a block whose body was taken holds no reference,
    /// and may be left as it is).
    ///
    /// The buffer must not be reachable from anything that runs before the caller is done
    /// with them (a callout might otherwise append over blocks not yet taken).
    func takeAll() -> UnsafeMutableBufferPointer<LoopBlock> {
        defer { storage.count = 0 }
        return UnsafeMutableBufferPointer(start: storage.base, count: storage.count)
    }
}
