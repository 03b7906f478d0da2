// A port's chunk of messages: its header's fields, allocating, linking and recycling it.

import Glibc
import Synchronization

/// A chunk's header (64 bytes): the next chunk (atomic: senders link chunks), the previous one and
/// the first position (set before the chunk is linked), the released mark (atomic: 0, or the tail
/// observed when the hint moved past it, plus 1), and the loop's link in its pending list.
@usableFromInline
enum PortChunk {
    /// A slot's flag: not written yet, a message, a message with its posting time, or a position
    /// its sender skipped (the port was closed).
    @inlinable static var empty: UInt8 { 0 }
    @inlinable static var written: UInt8 { 1 }
    @inlinable static var stamped: UInt8 { 2 }
    @inlinable static var skipped: UInt8 { 3 }

    /// Where a chunk's posting times begin.
    @inlinable static var stampsOffset: Int { 64 }

    static func allocate(_ layout: PortLayout) -> UnsafeMutableRawPointer {
        // On a cache line's boundary, as the slots are: a slot of 32 bytes (a three-word message
        // and its flag) is then never split across two lines, which the loop would fetch one by one
        // from the processor that wrote them. A block of the store starts on a page.
        let memory: UnsafeMutableRawPointer
        let isZeroed: Bool
        if layout.isStored {
            (memory, isZeroed) = PortChunkStore.shared.take()
        } else {
            var allocated: UnsafeMutableRawPointer?
            guard posix_memalign(&allocated, 64, layout.bytes) == 0, let large = allocated else {
                fatalError("RunLoopKit: out of memory for a port's messages")
            }
            (memory, isZeroed) = (large, false)
        }
        memory.bindMemory(to: Atomic<Int>.self, capacity: 1).initialize(to: Atomic(0))
        (memory + 24).bindMemory(to: Atomic<Int>.self, capacity: 1).initialize(to: Atomic(0))
        // Zero bytes are empty flags already, so a fresh block's pages are touched only as messages
        // reach them, and an idle port holds little memory
        // (docs/performance-notes.md#port-messages-after-another-rows-frees). A block another port
        // gave back holds its bytes: every flag is set here.
        if isZeroed { return memory }
        for offset in 0..<layout.capacity {
            let flag = layout.slot(offset, in: memory) + layout.flagOffset
            flag.bindMemory(to: Atomic<UInt8>.self, capacity: 1).initialize(to: Atomic(empty))
        }
        return memory
    }

    /// Gives back a chunk no sender or reader can reach any more.
    static func deallocate(_ chunk: UnsafeMutableRawPointer, _ layout: PortLayout) {
        if layout.isStored { PortChunkStore.shared.give(chunk) } else { free(chunk) }
    }

    private static func nextWord(_ chunk: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Atomic<Int>> {
        chunk.assumingMemoryBound(to: Atomic<Int>.self)
    }

    private static func releasedWord(_ chunk: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Atomic<Int>> {
        (chunk + 24).assumingMemoryBound(to: Atomic<Int>.self)
    }

    @inlinable @inline(__always)
    static func start(of chunk: UnsafeMutableRawPointer) -> Int {
        chunk.load(fromByteOffset: 16, as: Int.self)
    }

    static func previous(of chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        chunk.load(fromByteOffset: 8, as: UnsafeMutableRawPointer?.self).unsafelyUnwrapped
    }

    static func next(of chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        UnsafeMutableRawPointer(bitPattern: nextWord(chunk).pointee.load(ordering: .acquiring))
    }

    /// The next chunk, once the sender that claimed a position in it has linked it.
    static func waitForNext(of chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        var wait = SpinWait()
        while true {
            if let next = next(of: chunk) { return next }
            wait.pause()
        }
    }

    /// Sets the fields of a chunk about to be linked after `previous`.
    static func link(_ chunk: UnsafeMutableRawPointer, after previous: UnsafeMutableRawPointer?, start: Int) {
        chunk.storeBytes(of: previous, toByteOffset: 8, as: UnsafeMutableRawPointer?.self)
        chunk.storeBytes(of: start, toByteOffset: 16, as: Int.self)
    }

    /// Links `chunk` after `previous` if nothing is linked there yet.
    static func publish(_ chunk: UnsafeMutableRawPointer, after previous: UnsafeMutableRawPointer) -> Bool {
        nextWord(previous).pointee.compareExchange(
            expected: 0, desired: Int(bitPattern: chunk), ordering: .acquiringAndReleasing
        ).exchanged
    }

    /// Empties the header of a chunk the loop read through (its flags were cleared as it read).
    static func reset(_ chunk: UnsafeMutableRawPointer) {
        nextWord(chunk).pointee.store(0, ordering: .relaxed)
        releasedWord(chunk).pointee.store(0, ordering: .relaxed)
    }

    static func release(_ chunk: UnsafeMutableRawPointer, observedTail: Int) {
        releasedWord(chunk).pointee.store(observedTail &+ 1, ordering: .releasing)
    }

    /// The tail observed when the chunk was released; nil if it was not.
    static func observedTail(of chunk: UnsafeMutableRawPointer) -> Int? {
        let mark = releasedWord(chunk).pointee.load(ordering: .acquiring)
        return mark == 0 ? nil : mark &- 1
    }

    static func pendingNext(of chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        chunk.load(fromByteOffset: 32, as: UnsafeMutableRawPointer?.self)
    }

    static func setPendingNext(of chunk: UnsafeMutableRawPointer, _ next: UnsafeMutableRawPointer?) {
        chunk.storeBytes(of: next, toByteOffset: 32, as: UnsafeMutableRawPointer?.self)
    }
}
