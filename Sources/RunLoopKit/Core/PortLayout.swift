// Where a port's messages and their flags sit in its chunks, for one message type.

import Synchronization

/// Where things are in a port's chunks, for its message type.
@usableFromInline
struct PortLayout: Sendable {
    /// Slots per chunk.
    @usableFromInline let capacity: Int
    /// Bytes per slot: the message, then its flag byte, rounded up to the message's alignment.
    @usableFromInline let slotStride: Int
    /// Where in a slot the flag is.
    @usableFromInline let flagOffset: Int
    /// Where in a chunk the slots begin.
    @usableFromInline let slotsOffset: Int
    /// Bytes of one chunk.
    let bytes: Int
    /// Whether a chunk is a block of `PortChunkStore` (or memory from malloc, for large messages).
    let isStored: Bool

    @usableFromInline
    init(size: Int, alignment: Int) {
        flagOffset = size
        slotStride = (size + 1 + alignment - 1) / alignment * alignment
        let slotAlignment = max(alignment, 64)
        func slotsOffset(_ capacity: Int) -> Int {
            let stampsEnd = PortChunk.stampsOffset + capacity * MemoryLayout<Int64>.stride
            return (stampsEnd + slotAlignment - 1) / slotAlignment * slotAlignment
        }
        // As many slots as fill a block of the store (408 of a three-word message), or 8 in a chunk
        // of their own where 8 do not fit.
        var capacity = (PortChunkStore.blockBytes - PortChunk.stampsOffset) / (slotStride + MemoryLayout<Int64>.stride)
        while capacity >= 8 && slotsOffset(capacity) + capacity * slotStride > PortChunkStore.blockBytes {
            capacity -= 1
        }
        isStored = capacity >= 8
        self.capacity = max(8, capacity)
        self.slotsOffset = slotsOffset(self.capacity)
        bytes = self.slotsOffset + self.capacity * slotStride
    }

    @inlinable @inline(__always)
    func slot(_ offset: Int, in chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        chunk + (slotsOffset &+ offset &* slotStride)
    }

    @inlinable @inline(__always)
    func flag(ofSlot slot: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Atomic<UInt8>> {
        (slot + flagOffset).assumingMemoryBound(to: Atomic<UInt8>.self)
    }

    @inlinable @inline(__always)
    func stamp(_ offset: Int, in chunk: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Int64> {
        (chunk + PortChunk.stampsOffset).assumingMemoryBound(to: Int64.self) + offset
    }
}
