/// Where ports' chunks (`PortChannel`) come from and go back to: blocks of 16 KiB cut from
/// mappings of the store's own, shared by every port of the process whatever its message type.
///
/// Not from malloc. A chunk is taken by whichever sender reaches the end of the list, from that
/// thread's malloc arena, and glibc sorts an arena's freed small blocks into its bins at the first
/// request of 1 KiB or more made there after they were freed: a sender paid for what other code of
/// the process had freed, when other code (as GLib's rows of `runloop-bench --filter port`) had
/// freed many small blocks (docs/performance-notes.md#port-messages-after-another-rows-frees). From
/// the store, a block costs a few instructions under its lock whatever the rest of the process
/// does with malloc, and a port made after another takes that one's blocks without touching a
/// fresh page.
///
/// A free block is resident (its memory kept, up to `residentLimit` blocks) or discarded (its
/// memory given back to the kernel with `MADV_DONTNEED`, its address kept and used again before a
/// new mapping is made). A burst that made a port take many blocks costs the process no memory
/// once it is over, beyond the resident ones.
///
/// Any thread. A chunk larger than a block (8 messages of more than about 2 KiB) comes from malloc.
final class PortChunkStore: @unchecked Sendable {
    // @unchecked: the mutable state is guarded by `word`.

    /// The process's store, which every port uses.
    static let shared = PortChunkStore()

    /// Bytes of a block: a multiple of the page size, and every block starts on a page (so on a
    /// cache line, as `PortLayout` wants).
    static let blockBytes = 16 * 1024
    /// The start of a free resident block, which links it to the next one: AddressSanitizer's
    /// granule (8 bytes) holding a pointer.
    private static let linkBytes = 8

    /// Blocks cut from one mapping (64: 1 MiB).
    let blocksPerMapping: Int
    /// The free blocks that keep their memory (256: 4 MiB, a little more than the senders of one
    /// port may run ahead of its loop: 65,536 messages, 161 blocks of three-word ones).
    let residentLimit: Int

    private let word = LockWord()
    /// Free blocks with their memory, linked through their first word, the last given first (its
    /// lines the likeliest to be in a cache).
    private var resident: UnsafeMutableRawPointer?
    private var residentCount = 0
    /// Free blocks whose memory went back to the kernel.
    private var discarded: [UnsafeMutableRawPointer] = []
    /// The part of the newest mapping no block was cut from yet.
    private var uncut: UnsafeMutableRawPointer?
    private var uncutBlocks = 0
    /// Every mapping made, for `deinit`.
    private var mappings: [UnsafeMutableRawPointer] = []

    init(blocksPerMapping: Int = 64, residentLimit: Int = 256) {
        self.blocksPerMapping = blocksPerMapping
        self.residentLimit = residentLimit
    }

    /// Only a store whose blocks all came back goes away (`shared` never does).
    deinit {
        for mapping in mappings {
            // Unmarked first: the addresses may be mapped again for anything.
            Platform.markInUse(mapping, bytes: Self.blockBytes * blocksPerMapping)
            Platform.unmapMemory(mapping, bytes: Self.blockBytes * blocksPerMapping)
        }
    }

    /// A block of `blockBytes`, and whether its bytes are all zeros: a block no one used yet, or
    /// whose memory went back to the kernel, is, and its pages get memory only as they are
    /// touched; a resident one holds what its last user left.
    func take() -> (block: UnsafeMutableRawPointer, isZeroed: Bool) {
        word.lock()
        defer { word.unlock() }
        if let block = resident {
            resident = block.load(as: UnsafeMutableRawPointer?.self)
            residentCount -= 1
            Platform.markInUse(block, bytes: Self.blockBytes)
            return (block, false)
        }
        if let block = discarded.popLast() {
            Platform.markInUse(block, bytes: Self.blockBytes)
            return (block, true)
        }
        if uncutBlocks == 0 {
            switch Platform.mapMemory(Self.blockBytes * blocksPerMapping) {
            case .success(let mapping):
                uncut = mapping
                mappings.append(mapping)
            case .failure(let failure): fatalError("RunLoopKit: no memory for a port's messages: \(failure)")
            }
            uncutBlocks = blocksPerMapping
        }
        let block = uncut.unsafelyUnwrapped
        uncutBlocks -= 1
        uncut = uncutBlocks == 0 ? nil : block + Self.blockBytes
        return (block, true)
    }

    /// Gives back a block `take` returned.
    func give(_ block: UnsafeMutableRawPointer) {
        word.lock()
        if residentCount < residentLimit {
            block.storeBytes(of: resident, as: UnsafeMutableRawPointer?.self)
            resident = block
            residentCount += 1
            // Under AddressSanitizer, touching a block given back is reported (its link excepted).
            Platform.markReleased(block + Self.linkBytes, bytes: Self.blockBytes - Self.linkBytes)
            word.unlock()
            return
        }
        word.unlock()
        // Outside the lock: a system call. Until it is listed, no one can take the block.
        Platform.discardMemory(block, bytes: Self.blockBytes)
        Platform.markReleased(block, bytes: Self.blockBytes)
        word.lock()
        discarded.append(block)
        word.unlock()
    }

    /// The free blocks the store holds, resident and discarded, and the mappings it made.
    var counts: (resident: Int, discarded: Int, mappings: Int) {
        word.lock()
        defer { word.unlock() }
        return (residentCount, discarded.count, mappings.count)
    }
}
