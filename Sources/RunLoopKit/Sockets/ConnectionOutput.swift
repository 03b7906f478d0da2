import Synchronization

/// A connection's output: the bytes its socket has not taken yet, and the awaited writes waiting
/// for the queue to fall below the high write watermark (a setting: `ConnectionSettings`).
///
/// Owned by `LoopConnection`, which reaches it on the loop's thread only, through an accessor that
/// checks the thread in debug builds (`LoopConnection.output`). What other threads see of it (the
/// count queued and whether it is below the high watermark) it writes to two atomics the
/// connection keeps apart from it, as `let`s: a read from another thread while the loop thread
/// changes the output would otherwise be an access to one stored property from two threads at
/// once, which Swift does not allow even for atomics inside it (ThreadSanitizer reports a Swift
/// access race). What the queue's state asks of the connection (report `writable`, send the end of
/// stream, close) is decided by the connection and its lifecycle, not here.
struct ConnectionOutput: ~Copyable {
    /// What the socket has not taken yet; nil while nothing waits, which is the usual case (a
    /// write goes to the socket at once), so that an idle connection holds no output buffer.
    private var queue: EventBuffer?
    /// Awaited `write(_:)` calls waiting below the high watermark, each with the flag its task's
    /// cancellation sets, by which a cancellation finds its own call.
    private var waitingWriters: [(flag: CancellationFlag, continuation: CheckedContinuation<Void, any Error>)] = []
    /// The connection is on its loop's list of gathered writes, to be flushed when the pass ends
    /// (`LoopConnection+Flush.swift`).
    var awaitsPassFlush = false
    /// The number of the loop's pass in which a write last went to the socket at once (0: none).
    /// This and the flags before it fill the word after the queue's fields, with room for the
    /// connection's flags that follow: a byte and two add nothing to an idle connection.
    var directSendPass: UInt16 = 0

    /// The bytes queued now.
    var count: Int { queue?.count ?? 0 }

    // MARK: The queue

    /// Copies `bytes` to the end of the queue.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer().append(bytes)
    }

    /// Queues the bytes of `array` from `start` on by reference: no copy; the array is kept until
    /// they are sent or dropped.
    mutating func append(_ array: [UInt8], from start: Int) {
        let owner = QueuedArray(array)
        array.withUnsafeBytes { buffer().appendReference(UnsafeRawBufferPointer(rebasing: $0[start...]), owner: owner) }
    }

    /// Moves the bytes of `other` to the end of the queue, leaving `other` empty: no copy.
    mutating func moveAll(from other: EventBuffer) {
        buffer().moveAll(from: other)
    }

    /// Sends the front of the queue on `descriptor` and drops what was sent: what the send gave.
    /// Only while bytes are queued.
    func send(to descriptor: Int32) -> Result<Int, Errno> {
        queue!.send(to: descriptor)
    }

    /// Lets the buffer go once it is empty, so that a connection that once had a backlog holds
    /// none.
    mutating func releaseIfEmpty() {
        if count == 0 { queue = nil }
    }

    /// The buffer, made on the first write the socket does not take whole.
    private mutating func buffer() -> EventBuffer {
        if let queue { return queue }
        let created = EventBuffer()
        queue = created
        return created
    }

    // MARK: Watermarks

    /// Records `queued` (the count now) in `count` for other threads and moves across the
    /// `watermarks`, recorded in `below`: at the high one the queue stops being writable; at the
    /// low one, after the high, it is writable again and the waiting writers go on. Returns true
    /// then: the connection reports `writable`. An empty queue, the usual case, is at or below
    /// any low watermark and below any high one that counts (above 0): the watermarks are read
    /// only for a queue that holds bytes.
    @inline(__always)
    mutating func updateWatermarks(
        queued: Int, count: borrowing Atomic<Int>, below: borrowing Atomic<Bool>,
        watermarks: () -> (low: Int, high: Int)
    ) -> Bool {
        count.store(queued, ordering: .releasing)
        let isBelow = below.load(ordering: .relaxed)
        if isBelow && queued == 0 { return false }
        let (low, high) = queued == 0 ? (0, 0) : watermarks()
        if !isBelow {
            guard queued <= low else { return false }
            below.store(true, ordering: .releasing)
            let writers = waitingWriters
            waitingWriters.removeAll()
            for writer in writers { writer.continuation.resume() }
            return true
        }
        if queued >= high && high > 0 { below.store(false, ordering: .releasing) }
        return false
    }

    // MARK: Waiting writers

    /// An awaited write whose bytes are queued waits until the queue falls to the low watermark.
    mutating func waitBelowHighWatermark(
        _ flag: CancellationFlag, _ continuation: CheckedContinuation<Void, any Error>
    ) {
        waitingWriters.append((flag, continuation))
    }

    /// The task of the waiting write with `flag` was cancelled: if it still waits, it ends with
    /// `CancellationError` (its bytes stay queued).
    mutating func cancelWaiting(_ flag: CancellationFlag) {
        guard let index = waitingWriters.firstIndex(where: { $0.flag === flag }) else { return }
        waitingWriters.remove(at: index).continuation.resume(throwing: CancellationError())
    }

    /// The connection closed: the queue is dropped (`count` says so) and the waiting writers throw
    /// `error`.
    mutating func close(failingWritersWith error: LoopError, count: borrowing Atomic<Int>) {
        queue = nil
        count.store(0, ordering: .releasing)
        let writers = waitingWriters
        waitingWriters.removeAll()
        for writer in writers { writer.continuation.resume(throwing: error) }
    }
}

/// An array whose bytes a connection's queue holds by reference: its storage (a native array's,
/// which does not move while referenced) stays alive and unchanged while the box does.
private final class QueuedArray {
    let array: [UInt8]
    init(_ array: [UInt8]) { self.array = array }
}
