import Glibc
import Synchronization

/// The queue behind a port (`LoopPort`): many senders, one reader (the loop's thread), and no lock
/// on a message's path.
///
/// A sender claims a position with one atomic add on `tail`, finds the chunk that holds it, writes
/// the message into its slot and then the slot's flag. The loop reads positions in order, each
/// once its flag says it was written. A sender that is preempted therefore stalls nobody but the
/// loop, and the loop only at that one slot; with a lock, it stalled every other sender too
/// (docs/performance-notes.md#port-messages-workload-16); see docs/Benchmarks.md for what this
/// queue gives (`runloop-bench --filter port`).
///
/// Positions count every message a port was ever sent, so each chunk covers the fixed range
/// `start ..< start + capacity` of them, and a chunk is found from `hint` (a recent one) by
/// walking the chunks' links. Chunks are raw memory: a header, the posting times, then the slots
/// (a message and its flag byte), in a block of `PortChunkStore`. The loop recycles a chunk it has
/// read by linking it again at the end of the list (or gives it back to the store beyond
/// `keptAhead`), so a steady stream takes no memory.
///
/// Recycling is safe once no sender can still be looking at the chunk. A sender only ever reaches
/// a chunk from `hint`, and only after it claimed its position. So when `hint` moves past a chunk,
/// the one that moved it reads `tail` and marks the chunk released with that figure: any sender
/// that could still reach the chunk claimed a lower position, and it is done with the chunk once
/// that position is written, which the loop sees before it reads past it. The loop recycles a
/// chunk once it is released and the loop has read up to its figure.
///
/// Only the loop's thread reads messages, with one exception: `close` drops, on its caller's
/// thread, what the loop had not taken yet. `takeWord` keeps the two apart, taken once per batch.
///
/// Not generic: what a message's type changes (its size, copying it) is in `LoopPort.Mailbox`.
@usableFromInline
class PortChannel: @unchecked Sendable {
    // Groups of fields on cache lines of their own (64 bytes of padding between them). The first
    // is read by every sender and written only when the port closes or an instrument comes or goes;
    // the second is written by every sender; the last is the loop's.

    @usableFromInline let isOpen = Atomic<Bool>(true)
    /// Whether senders stamp their messages: an instrument listened to the loop at its last
    /// delivery (a relaxed hint; the first batch after an instrument attaches goes unstamped).
    @usableFromInline let stamps = Atomic<Bool>(false)
    @usableFromInline let layout: PortLayout
    private let separatesReaders = CacheLinePadding()

    /// The next position to claim.
    @usableFromInline let tail = Atomic<Int>(0)
    /// A chunk at or near the one holding the newest positions (its address): senders start there.
    @usableFromInline let hint: Atomic<Int>
    /// Whether senders must signal the port: the loop found it empty and will not look again by
    /// itself. Cleared by the sender that signals, and by the loop when it takes a batch.
    @usableFromInline let asleep = Atomic<Bool>(true)
    /// When the port became ready (a signal stamp; 0: no message since the loop last took them).
    @usableFromInline let readySince = Atomic<UInt64>(0)
    private let separatesSenders = CacheLinePadding()

    /// Positions below this belong to the loop's batches (or were dropped by `close`): set under
    /// `takeWord`, read by `wasAdded` from any thread.
    private let frontier = Atomic<Int>(0)
    private let takeWord = LockWord()
    /// The positions the loop has read, as of the last chunk it moved on from: how far behind the
    /// senders it is. A sender that starts a chunk more than `backlogLimit` positions ahead of it
    /// yields its processor once. With more senders than processors the loop otherwise gets a
    /// thread's share of them while the senders fill fresh chunks, and faults in fresh pages
    /// (docs/performance-notes.md#port-messages-workload-16). A yield is not a wait: a sender whose
    /// loop is stopped or busy goes on, at one system call per chunk.
    private let read = Atomic<Int>(0)

    // The loop's thread only (and `deinit`).
    /// The positions the loop ever took, and the ones it read (handed to the handler or skipped).
    @usableFromInline @exclusivity(unchecked) final var taken = 0
    @usableFromInline @exclusivity(unchecked) final var delivered = 0
    /// The chunk holding position `delivered` (or ending at it).
    @usableFromInline @exclusivity(unchecked) final var cursor: UnsafeMutableRawPointer
    /// Chunks the loop read through, oldest first, waiting to be released (`pendingNext` links).
    @exclusivity(unchecked) private final var pendingFirst: UnsafeMutableRawPointer?
    @exclusivity(unchecked) private final var pendingLast: UnsafeMutableRawPointer?
    /// The list's last chunk as the loop last saw it; senders may have linked more since.
    @exclusivity(unchecked) private final var end: UnsafeMutableRawPointer
    /// The most chunks kept ahead of the senders; a burst's others go back. Blocks of the store: a
    /// few, since a burst takes them back from the store at one lock per chunk, and the store,
    /// not each port, keeps the memory of the free ones (a port that once took 65,536 messages
    /// at a time held 161 blocks, 2.6 MB, for as long as it lived). Chunks from malloc (large
    /// messages): room for as many messages as the loop keeps room for posted blocks, so that a
    /// steady stream of them allocates nothing.
    private let keptAhead: Int
    /// How far senders may run ahead of the loop before they yield: as many messages as the loop
    /// keeps room for posted blocks.
    private let backlogLimit: Int

    @usableFromInline
    init(layout: PortLayout) {
        self.layout = layout
        let first = PortChunk.allocate(layout)
        PortChunk.link(first, after: nil, start: 0)
        hint = Atomic(Int(bitPattern: first))
        cursor = first
        end = first
        let backlogChunks = (BlockBuffer.retainedCapacity + layout.capacity - 1) / layout.capacity
        keptAhead = layout.isStored ? PortChannel.storedChunksKeptAhead : backlogChunks
        backlogLimit = backlogChunks * layout.capacity
    }

    /// The chunks a port of small messages keeps ahead of its senders (`keptAhead`).
    static let storedChunksKeptAhead = 4

    deinit {
        // The subclass destroyed the messages; every chunk is pending or linked after `cursor`.
        while let chunk = pendingFirst {
            pendingFirst = PortChunk.pendingNext(of: chunk)
            PortChunk.deallocate(chunk, layout)
        }
        var chunk: UnsafeMutableRawPointer? = cursor
        while let current = chunk {
            chunk = PortChunk.next(of: current)
            PortChunk.deallocate(current, layout)
        }
    }

    // MARK: Senders

    /// The chunk holding `position`, which the caller claimed and has not written yet.
    @inlinable @inline(__always)
    final func chunk(holding position: Int) -> UnsafeMutableRawPointer {
        let hinted = UnsafeMutableRawPointer(bitPattern: hint.load(ordering: .sequentiallyConsistent)).unsafelyUnwrapped
        let offset = position &- PortChunk.start(of: hinted)
        if UInt(bitPattern: offset) < UInt(bitPattern: layout.capacity) { return hinted }
        return locate(position, from: hinted)
    }

    /// Walks from `chunk` (the hint, or a chunk holding a lower position the caller claimed) to
    /// the chunk holding `position`, linking chunks where the list ends; moves the hint forward.
    @usableFromInline @inline(never)
    final func locate(_ position: Int, from chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        var found = chunk
        if position < PortChunk.start(of: found) {
            // A sender claimed a later position and moved the hint past this one's chunk first.
            repeat { found = PortChunk.previous(of: found) } while position < PortChunk.start(of: found)
            return found
        }
        repeat { found = nextOrGrow(found) } while position >= PortChunk.start(of: found) &+ layout.capacity
        advanceHint(from: chunk, to: found)
        if position &- read.load(ordering: .relaxed) > backlogLimit { Platform.yieldProcessor() }
        return found
    }

    /// The chunk after `chunk`, linked now (newly allocated) if the list ends there.
    private func nextOrGrow(_ chunk: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        if let next = PortChunk.next(of: chunk) { return next }
        let fresh = PortChunk.allocate(layout)
        PortChunk.link(fresh, after: chunk, start: PortChunk.start(of: chunk) &+ layout.capacity)
        if PortChunk.publish(fresh, after: chunk) { return fresh }
        // Another sender (or the loop) linked one first: this one goes at the end, for later.
        let next = PortChunk.next(of: chunk).unsafelyUnwrapped
        append(fresh, from: next)
        return next
    }

    /// Links `chunk` (in no list) after the last chunk, walking there from `from`.
    private func append(_ chunk: UnsafeMutableRawPointer, from: UnsafeMutableRawPointer) {
        var last = from
        while true {
            while let next = PortChunk.next(of: last) { last = next }
            PortChunk.link(chunk, after: last, start: PortChunk.start(of: last) &+ layout.capacity)
            if PortChunk.publish(chunk, after: last) { return }
        }
    }

    /// Moves the hint from `old` to `new` (later), unless another thread moved it; the chunks it
    /// passes are released with the tail as it is now (see the type's comment).
    private func advanceHint(from old: UnsafeMutableRawPointer, to new: UnsafeMutableRawPointer) {
        guard
            hint.compareExchange(
                expected: Int(bitPattern: old), desired: Int(bitPattern: new), ordering: .sequentiallyConsistent
            ).exchanged
        else { return }
        let observed = tail.load(ordering: .sequentiallyConsistent)
        var chunk = old
        while chunk != new {
            // Read before the release: from then on the loop may recycle the chunk.
            let next = PortChunk.next(of: chunk).unsafelyUnwrapped
            PortChunk.release(chunk, observedTail: observed)
            chunk = next
        }
    }

    /// After a sender wrote its message: a signal stamp for the port if it has none.
    @usableFromInline @inline(never)
    final func readyStamp() -> UInt64 {
        let since = readySince.load(ordering: .relaxed)
        if since != 0 { return since }
        let stamp = LoopSource.nextSignalStamp()
        let (exchanged, original) = readySince.compareExchange(expected: 0, desired: stamp, ordering: .relaxed)
        return exchanged ? stamp : original
    }

    /// After a sender wrote its message: whether it must signal the port. The loop sets `asleep`
    /// before it looks at `tail` a last time, and a sender reads it after its add to `tail`: one of
    /// the two sees the other.
    @inlinable @inline(__always)
    final func mustSignal() -> Bool {
        if readySince.load(ordering: .relaxed) == 0 { _ = readyStamp() }
        return asleep.load(ordering: .sequentiallyConsistent)
            && asleep.exchange(false, ordering: .sequentiallyConsistent)
    }

    /// A sender's posting time for an instrument (`stamps`).
    @usableFromInline
    static func postingTime() -> Int64 { TickClock.now }

    // MARK: The loop

    /// Loop thread: a signal stamp while messages wait (0 while a delivery is under way), nil if
    /// none do; in that case, from now on senders signal.
    final func readiness() -> UInt64? {
        if delivered != taken { return 0 }
        guard isOpen.load(ordering: .relaxed) else { return nil }
        if tail.load(ordering: .sequentiallyConsistent) != taken { return readyStamp() }
        asleep.store(true, ordering: .sequentiallyConsistent)
        if tail.load(ordering: .sequentiallyConsistent) != taken { return readyStamp() }
        return nil
    }

    /// Any thread, after the port was added to a mode, which the loop may not scan by itself:
    /// from now on senders signal, and whether messages wait (the caller signals for them).
    final func wasAdded() -> Bool {
        asleep.store(true, ordering: .sequentiallyConsistent)
        return tail.load(ordering: .sequentiallyConsistent) != frontier.load(ordering: .relaxed)
    }

    /// The start of a delivery: takes every position claimed so far; the running loop.
    @usableFromInline
    final func takeBatch() -> Loop {
        let loop = Loop.current
        let stamping = loop.stampsPostedWork
        if stamps.load(ordering: .relaxed) != stamping { stamps.store(stamping, ordering: .relaxed) }
        takeWord.lock()
        if isOpen.load(ordering: .relaxed) {
            readySince.store(0, ordering: .relaxed)
            // The promise `finishBatch` keeps: the next pass looks at the port.
            asleep.store(false, ordering: .relaxed)
            taken = tail.load(ordering: .sequentiallyConsistent)
            frontier.store(taken, ordering: .relaxed)
        }
        takeWord.unlock()
        return loop
    }

    /// The chunk after the cursor's, which the loop has read through: the cursor moves there. Its
    /// sender may still be linking it.
    @usableFromInline @inline(never)
    final func advanceCursor() -> UnsafeMutableRawPointer {
        let passed = cursor
        let next = PortChunk.waitForNext(of: passed)
        PortChunk.setPendingNext(of: passed, nil)
        if let last = pendingLast { PortChunk.setPendingNext(of: last, passed) } else { pendingFirst = passed }
        pendingLast = passed
        cursor = next
        read.store(PortChunk.start(of: next), ordering: .relaxed)
        return next
    }

    /// Loop thread, the end of a delivery: keeps the promise made in `takeBatch` and recycles the
    /// chunks no sender can reach any more.
    @usableFromInline
    final func finishBatch(on loop: Loop) {
        loop.portSignalled.store(true, ordering: .releasing)
        guard isOpen.load(ordering: .relaxed) else { return }
        while let chunk = pendingFirst, let observed = PortChunk.observedTail(of: chunk), delivered >= observed {
            pendingFirst = PortChunk.pendingNext(of: chunk)
            if pendingFirst == nil { pendingLast = nil }
            recycle(chunk)
        }
    }

    /// The chunks the port holds: waiting to be released, and linked from the cursor's on. Loop
    /// thread, with no sender sending.
    final var chunksHeld: Int {
        var count = 0
        var pending = pendingFirst
        while let chunk = pending {
            count += 1
            pending = PortChunk.pendingNext(of: chunk)
        }
        var linked: UnsafeMutableRawPointer? = cursor
        while let chunk = linked {
            count += 1
            linked = PortChunk.next(of: chunk)
        }
        return count
    }

    /// Links a chunk the loop read through at the end of the list, or gives it back if enough wait
    /// there.
    private func recycle(_ chunk: UnsafeMutableRawPointer) {
        if PortChunk.start(of: end) < PortChunk.start(of: cursor) { end = cursor }
        var last = end
        while let next = PortChunk.next(of: last) { last = next }
        end = last
        let ahead = (PortChunk.start(of: last) &+ layout.capacity &- tail.load(ordering: .relaxed)) / layout.capacity
        guard ahead < keptAhead else { return PortChunk.deallocate(chunk, layout) }
        PortChunk.reset(chunk)
        append(chunk, from: last)
        end = chunk
    }

    /// Any thread: closes the channel, and returns the positions the loop had not taken (every
    /// sender that claimed one of them writes it or marks it skipped) and the chunk holding the
    /// first. The caller drops their messages. Nil if it was closed already.
    final func close() -> (chunk: UnsafeMutableRawPointer, from: Int, to: Int)? {
        guard isOpen.exchange(false, ordering: .sequentiallyConsistent) else { return nil }
        takeWord.lock()
        let from = frontier.load(ordering: .relaxed)
        // Read after the store above: a sender that claims a later position sees the port closed.
        let to = tail.load(ordering: .sequentiallyConsistent)
        frontier.store(to, ordering: .relaxed)
        takeWord.unlock()
        guard from < to else { return nil }
        // From the hint, read after the tail: the loop reads no further than `from`, and a chunk
        // the hint moves past from now on is released with a tail of at least `to`, so none of the
        // chunks walked here is recycled meanwhile.
        let hinted = UnsafeMutableRawPointer(bitPattern: hint.load(ordering: .sequentiallyConsistent)).unsafelyUnwrapped
        var chunk = hinted
        while from < PortChunk.start(of: chunk) { chunk = PortChunk.previous(of: chunk) }
        while from >= PortChunk.start(of: chunk) &+ layout.capacity { chunk = PortChunk.waitForNext(of: chunk) }
        return (chunk, from, to)
    }

    /// The flag of the slot at `offset` of `chunk` once its sender wrote it (or marked it skipped):
    /// the slot's position was claimed, so that is a few instructions away unless the sender was
    /// preempted, and then it gets the processor.
    @usableFromInline @inline(never)
    static func waitForWrite(_ flag: UnsafeMutablePointer<Atomic<UInt8>>) -> UInt8 {
        var wait = SpinWait()
        while true {
            let state = flag.pointee.load(ordering: .acquiring)
            if state != PortChunk.empty { return state }
            wait.pause()
        }
    }
}
