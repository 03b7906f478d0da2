import Glibc

/// A port's messages with their posting times (`LoopPort`), first in, first out, in chunks of
/// fixed size linked in order.
///
/// Chunks, not one growing buffer: a burst (a loop descheduled while its senders go on) only
/// links more chunks, where a buffer would be copied into a fresh one at each doubling, its new
/// pages faulted in one by one; and the chunks a delivery has emptied go back to the senders
/// (`PortChunkStack`), still in the cache, so a steady stream allocates nothing.
///
/// A chunk is raw memory: a header (`PortChunk`), the posting times, then the messages. The
/// owner releases the chunks (`release(into:)`).
///
/// A message's path (`append`, `takeFirst`) is inlinable, compiled for the caller's `Message`
/// (see `LoopPort.Mailbox`); the rest is generic and not specialized: nothing here names a type
/// built from `Message` (a tuple, an `Optional`), whose metadata the runtime would look up on
/// every call.
@usableFromInline
struct PortQueue<Message> {
    @usableFromInline var first: UnsafeMutableRawPointer?
    @usableFromInline var last: UnsafeMutableRawPointer?
    // The counts below move with wrapping arithmetic on a message's path: they count messages held
    // in memory, far from `Int.max`, and an overflow check is a branch per message.

    /// Index in `first` of the next message to take.
    @usableFromInline var start = 0
    /// Messages not yet taken.
    @usableFromInline var count = 0
    /// Messages per chunk, and where in a chunk they begin.
    @usableFromInline let chunkCapacity: Int
    @usableFromInline let messagesOffset: Int

    @usableFromInline
    init() {
        let stride = MemoryLayout<Message>.stride
        // About 16 KiB of messages a chunk (8 at the least).
        chunkCapacity = max(8, min(256, 16_384 / max(stride, 1)))
        let stampsEnd = PortChunk.headerSize + chunkCapacity * MemoryLayout<Int64>.stride
        let alignment = max(MemoryLayout<Message>.alignment, 16)
        messagesOffset = (stampsEnd + alignment - 1) / alignment * alignment
    }

    @inlinable var isEmpty: Bool { count == 0 }

    /// Bytes of one chunk.
    var chunkBytes: Int { messagesOffset + chunkCapacity * MemoryLayout<Message>.stride }

    /// Chunks worth `messages` messages (rounded up).
    func chunks(holding messages: Int) -> Int { (messages + chunkCapacity - 1) / chunkCapacity }

    @inlinable @inline(__always)
    func messages(in chunk: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Message> {
        (chunk + messagesOffset).assumingMemoryBound(to: Message.self)
    }

    @inlinable @inline(__always)
    func stamps(in chunk: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Int64> {
        (chunk + PortChunk.headerSize).assumingMemoryBound(to: Int64.self)
    }

    /// Appends a copy of `message`, taking a chunk from `spares` (or a new one) when the last is full.
    @inlinable @inline(__always)
    mutating func append(_ message: borrowing Message, postedAt: Int64, spares: inout PortChunkStack) {
        var chunk: UnsafeMutableRawPointer
        var filled: Int
        if let last, case let held = PortChunk.count(of: last), held < chunkCapacity {
            chunk = last
            filled = held
        } else {
            chunk = linkChunk(spares: &spares)
            filled = 0
        }
        if postedAt != 0 { stamp(chunk, at: filled, postedAt) }
        (messages(in: chunk) + filled).initialize(to: copy message)
        PortChunk.setCount(of: chunk, filled &+ 1)
        count &+= 1
    }

    /// Links an empty chunk from `spares` (or a new one) after the last; returns it.
    @usableFromInline
    mutating func linkChunk(spares: inout PortChunkStack) -> UnsafeMutableRawPointer {
        let chunk = spares.pop() ?? PortChunk.allocate(bytes: chunkBytes)
        PortChunk.setNext(of: chunk, nil)
        PortChunk.setStamped(chunk, false)
        if let last { PortChunk.setNext(of: last, chunk) } else { first = chunk }
        last = chunk
        return chunk
    }

    /// Writes the posting time of the message at `index` of `chunk`. Posting times are written
    /// only while an instrument listens: otherwise the chunk says none was, and its times' cache
    /// lines are never written.
    @usableFromInline
    func stamp(_ chunk: UnsafeMutableRawPointer, at index: Int, _ postedAt: Int64) {
        if !PortChunk.isStamped(chunk) {
            stamps(in: chunk).update(repeating: 0, count: index)
            PortChunk.setStamped(chunk, true)
        }
        stamps(in: chunk)[index] = postedAt
    }

    /// The posting time of the next message to take (0: not stamped). Not empty.
    @inlinable @inline(__always)
    func firstPostedAt() -> Int64 {
        let chunk = first.unsafelyUnwrapped
        return PortChunk.isStamped(chunk) ? stamps(in: chunk)[start] : 0
    }

    /// Moves the next message out; a chunk it empties goes to `emptied`. Not empty.
    @inlinable @inline(__always)
    mutating func takeFirst(emptying emptied: inout PortChunkStack) -> Message {
        let chunk = first.unsafelyUnwrapped
        let message = (messages(in: chunk) + start).move()
        start &+= 1
        count &-= 1
        if start == PortChunk.count(of: chunk) {
            // Nothing is appended to a chunk once its queue is being taken from: a queue is filled
            // by senders and emptied by the loop, after the two traded their chunks.
            first = PortChunk.next(of: chunk)
            if first == nil { last = nil }
            start = 0
            emptied.push(chunk)
        }
        return message
    }

    /// Trades chunks with `other`.
    mutating func exchange(with other: inout PortQueue) {
        (first, other.first) = (other.first, first)
        (last, other.last) = (other.last, last)
        (start, other.start) = (other.start, start)
        (count, other.count) = (other.count, count)
    }

    /// Links the chunks of `other` (never taken from) after this queue's, leaving `other` empty.
    mutating func append(movingFrom other: inout PortQueue) {
        guard let otherFirst = other.first else { return }
        if let last {
            PortChunk.setNext(of: last, otherFirst)
        } else {
            first = otherFirst
            start = other.start
        }
        last = other.last
        count += other.count
        other.first = nil
        other.last = nil
        other.start = 0
        other.count = 0
    }

    /// Destroys the messages not taken and gives every chunk to `chunks`, leaving the queue empty.
    mutating func release(into chunks: inout PortChunkStack) {
        while let chunk = first {
            let held = PortChunk.count(of: chunk)
            (messages(in: chunk) + start).deinitialize(count: held - start)
            first = PortChunk.next(of: chunk)
            start = 0
            chunks.push(chunk)
        }
        last = nil
        count = 0
    }
}

/// A chunk's header: the next chunk, how many messages it holds, and whether their posting times
/// were written.
@usableFromInline
enum PortChunk {
    /// Where a chunk's posting times begin.
    @inlinable static var headerSize: Int { 32 }

    @usableFromInline
    static func allocate(bytes: Int) -> UnsafeMutableRawPointer {
        guard let memory = malloc(bytes) else { fatalError("RunLoopKit: out of memory for a port's messages") }
        return memory
    }

    @inlinable @inline(__always)
    static func next(of chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        chunk.load(as: UnsafeMutableRawPointer?.self)
    }

    @inlinable @inline(__always)
    static func setNext(of chunk: UnsafeMutableRawPointer, _ next: UnsafeMutableRawPointer?) {
        chunk.storeBytes(of: next, as: UnsafeMutableRawPointer?.self)
    }

    @inlinable @inline(__always)
    static func count(of chunk: UnsafeMutableRawPointer) -> Int {
        chunk.load(fromByteOffset: 8, as: Int.self)
    }

    @inlinable @inline(__always)
    static func setCount(of chunk: UnsafeMutableRawPointer, _ count: Int) {
        chunk.storeBytes(of: count, toByteOffset: 8, as: Int.self)
    }

    @inlinable @inline(__always)
    static func isStamped(_ chunk: UnsafeMutableRawPointer) -> Bool {
        chunk.load(fromByteOffset: 16, as: Bool.self)
    }

    @inlinable @inline(__always)
    static func setStamped(_ chunk: UnsafeMutableRawPointer, _ stamped: Bool) {
        chunk.storeBytes(of: stamped, toByteOffset: 16, as: Bool.self)
    }
}

/// Empty chunks, linked through their headers.
@usableFromInline
struct PortChunkStack {
    @usableFromInline var top: UnsafeMutableRawPointer?
    @usableFromInline var count = 0

    @usableFromInline init() {}

    @inlinable @inline(__always)
    mutating func push(_ chunk: UnsafeMutableRawPointer) {
        PortChunk.setNext(of: chunk, top)
        PortChunk.setCount(of: chunk, 0)
        top = chunk
        count += 1
    }

    @inlinable @inline(__always)
    mutating func pop() -> UnsafeMutableRawPointer? {
        guard let chunk = top else { return nil }
        top = PortChunk.next(of: chunk)
        count -= 1
        return chunk
    }

    /// Moves chunks to `other` until it holds `limit`; the rest stay here.
    mutating func move(to other: inout PortChunkStack, upTo limit: Int) {
        while other.count < limit, let chunk = pop() { other.push(chunk) }
    }

    /// Frees every chunk.
    mutating func free() {
        while let chunk = pop() { Glibc.free(chunk) }
    }
}

/// 64 bytes of nothing, stored between fields that different processors write so that they never
/// share a cache line.
struct CacheLinePadding {
    private let words: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
}
