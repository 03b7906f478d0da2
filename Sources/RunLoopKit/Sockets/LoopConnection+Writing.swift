// Writing to a connection from any thread: queueing bytes, the watermarks, and what the output's state reads.

import Synchronization

extension LoopConnection {
    /// Queues a copy of `bytes` for sending (sending at once what the socket takes, when nothing
    /// is queued before them and this is the connection's first write of the loop's pass),
    /// without waiting: the spelling for synchronous code, handlers included, and for `async` code
    /// that means to queue only. In `async` code, `try await write(_:)` waits below the high
    /// watermark instead (in every context, top-level code included: no synchronous `write(_:)` of
    /// a byte collection stands beside it).
    ///
    /// Any thread; writes from one thread go out in the order they were made.
    public func enqueue(_ bytes: some Collection<UInt8>) {
        if isOnLoopThread {
            // An array's large rest is queued by reference to the array, not copied.
            let queued: Void? = bytes.withContiguousStorageIfAvailable {
                queueOutput(UnsafeRawBufferPointer($0), of: { bytes as? [UInt8] })
            }
            if queued == nil { Array(bytes).withUnsafeBytes { queueOutput($0) } }
        } else if let array = bytes as? [UInt8] {
            // The array itself crosses to the loop: its bytes are not copied to a buffer.
            onLoop { $0.queueOutput(array) }
        } else {
            var buffer = LoopBuffer(bytes)
            write(&buffer)
        }
    }

    /// Moves the bytes of `buffer` to the output queue without copying them, leaving `buffer`
    /// empty.
    ///
    /// Any thread; writes from one thread go out in the order they were made.
    public func write(_ buffer: inout LoopBuffer) {
        guard !buffer.isEmpty else { return }
        if isOnLoopThread {
            buffer.withUnique { queueOutput($0) }
        } else {
            // The buffer's storage itself goes to the loop: no copy, no new buffer.
            let box = Unchecked(buffer.take())
            onLoop { $0.queueOutput(box.value) }
        }
    }

    /// Output queued and not sent yet, in bytes.
    ///
    /// Any thread; the answer may be stale by the time it is read.
    public var outputBufferedBytes: Int { queuedCount.load(ordering: .acquiring) }

    /// When `isWritable` turns false (`high`) and when `.writable` is reported (`low`); by default
    /// `defaultWriteWatermarks`.
    ///
    /// Any thread. `low` must be 0 or more and not above `high`, or it is a programmer error.
    public var writeWatermarks: (low: Int, high: Int) {
        get { withSettings { $0.watermarks } }
        set {
            precondition(
                newValue.low >= 0 && newValue.low <= newValue.high,
                "RunLoopKit: writeWatermarks needs 0 <= low <= high, not (low: \(newValue.low), high: \(newValue.high))"
            )
            withSettings { $0.watermarks = newValue }
            // The loop thread checks the queue against them.
            onLoop { $0.outputDidChange() }
        }
    }

    /// Whether the connection is open: connected, and not closed yet (it is still open while a
    /// graceful `close()` flushes its output and waits for the peer's end of stream). False once
    /// `closed` is reported, or is about to be.
    ///
    /// Any thread; the answer may be stale by the time it is read.
    public var isOpen: Bool { openState.load(ordering: .acquiring) }

    /// Whether the queued output is below the high watermark.
    ///
    /// Any thread.
    public var isWritable: Bool { belowHighWatermark.load(ordering: .acquiring) }
}
