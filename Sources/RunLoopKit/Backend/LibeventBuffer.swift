internal import CLibevent
import Glibc

// libevent's evbuffer behind `LoopBuffer` and the connections' queues: a chain of blocks, filled
// with readv and emptied with writev, where appending one buffer to another moves its blocks
// instead of copying bytes. An evbuffer belongs to no event base, so unlike the rest of the
// backend it may be used on any thread, by one thread at a time.

/// One evbuffer, freed with the object.
final class EventBuffer {
    private let raw: OpaquePointer

    /// The most blocks one `writev` sends: the kernel's limit is 1024, and this many blocks of
    /// libevent's sizes already hold more than a socket's send buffer.
    private static let writeVectors = 64

    init() {
        guard let raw = evbuffer_new() else { fatalError("RunLoopKit: evbuffer_new failed (out of memory)") }
        self.raw = raw
    }

    deinit { evbuffer_free(raw) }

    var count: Int { evbuffer_get_length(raw) }

    /// Copies `bytes` in (into the free space of the last block, or new blocks).
    func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let code = evbuffer_add(raw, base, bytes.count)
        precondition(code == 0, "RunLoopKit: evbuffer_add failed (out of memory)")
    }

    /// Adds `bytes` as a block of their own, not copied: `owner`, which keeps them alive and
    /// unchanged, is retained until the buffer lets go of the block (sent or dropped).
    func appendReference(_ bytes: UnsafeRawBufferPointer, owner: AnyObject) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let context = Unmanaged.passRetained(owner).toOpaque()
        let code = evbuffer_add_reference(
            raw, base, bytes.count,
            { _, _, context in
                Unmanaged<AnyObject>.fromOpaque(context!).release()
            }, context)
        precondition(code == 0, "RunLoopKit: evbuffer_add_reference failed (out of memory)")
    }

    /// Moves every block of `other` to the end of this buffer, leaving `other` empty: no copy.
    func moveAll(from other: EventBuffer) {
        let code = evbuffer_add_buffer(raw, other.raw)
        precondition(code == 0, "RunLoopKit: evbuffer_add_buffer failed")
    }

    /// A buffer with the same bytes (for copy-on-write).
    func copy() -> EventBuffer {
        let copy = EventBuffer()
        forEachBlock { copy.append($0) }
        return copy
    }

    /// Calls `body` with each block's bytes, in order, without removing them.
    private func forEachBlock(_ body: (UnsafeRawBufferPointer) -> Void) {
        let blocks = Int(evbuffer_peek(raw, -1, nil, nil, 0))
        guard blocks > 0 else { return }
        var vectors = [iovec](repeating: iovec(), count: blocks)
        _ = evbuffer_peek(raw, -1, nil, &vectors, Int32(blocks))
        for vector in vectors { body(UnsafeRawBufferPointer(start: vector.iov_base, count: vector.iov_len)) }
    }

    /// Removes and returns up to `maxLength` bytes from the front.
    func remove(maxLength: Int) -> [UInt8] {
        let length = min(maxLength, count)
        guard length > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: length) { bytes, initialized in
            initialized = Int(evbuffer_remove(raw, bytes.baseAddress, length))
        }
    }

    /// Removes up to `bytes.count` bytes from the front into `bytes`; returns the count.
    func remove(into bytes: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        return max(0, Int(evbuffer_remove(raw, base, bytes.count)))
    }

    /// Lets `fill` write up to `maxLength` bytes into the buffer's free space (one contiguous
    /// extent, no copy) and keeps the count it returns (0 or more).
    func append(maxLength: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int) -> Int {
        var extent = iovec()
        guard evbuffer_reserve_space(raw, maxLength, &extent, 1) == 1 else { return 0 }
        let room = min(extent.iov_len, maxLength)
        let filled = max(0, min(fill(UnsafeMutableRawBufferPointer(start: extent.iov_base, count: room)), room))
        extent.iov_len = filled
        _ = evbuffer_commit_space(raw, &extent, 1)
        return filled
    }

    /// Calls `body` with the first block's bytes (empty when the buffer is), without removing them.
    func withFirstBlock<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var vector = iovec()
        guard evbuffer_peek(raw, -1, nil, &vector, 1) > 0 else {
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return body(UnsafeRawBufferPointer(start: vector.iov_base, count: vector.iov_len))
    }

    /// Drops `length` bytes from the front.
    func drain(_ length: Int) {
        _ = evbuffer_drain(raw, length)
    }

    /// The offset of the first occurrence of `pattern`, if any.
    func firstIndex(of pattern: UnsafeRawBufferPointer) -> Int? {
        guard let base = pattern.baseAddress, pattern.count > 0 else { return 0 }
        let found = evbuffer_search(raw, base.assumingMemoryBound(to: CChar.self), pattern.count, nil)
        return found.pos < 0 ? nil : found.pos
    }

    /// Removes a line ending in LF or CRLF and returns it without the ending; nil if there is no
    /// complete line.
    func readLine() -> [UInt8]? {
        var length = 0
        guard let line = evbuffer_readln(raw, &length, EVBUFFER_EOL_CRLF) else { return nil }
        defer { free(line) }
        return [UInt8](UnsafeRawBufferPointer(start: line, count: length))
    }

    /// Makes the first `length` bytes contiguous (copying only if they span blocks) and calls
    /// `body` with them.
    func withContiguousBytes<R>(upTo length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let length = min(length, count)
        guard length > 0, let start = evbuffer_pullup(raw, length) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeRawBufferPointer(start: start, count: length))
    }

    /// Reads up to `maxLength` bytes from `descriptor` straight into the buffer's free space
    /// (`readv` into at most two blocks). Returns the count read, 0 at end of file.
    func read(from descriptor: Int32, maxLength: Int) -> Result<Int, Errno> {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { extents in
            let used = Int(evbuffer_reserve_space(raw, maxLength, extents.baseAddress, 2))
            guard used > 0 else { return .failure(Errno(ENOMEM)) }
            // The space reserved may exceed what was asked for: read no more than that.
            var allowed = maxLength
            for index in 0..<used {
                extents[index].iov_len = min(extents[index].iov_len, allowed)
                allowed -= extents[index].iov_len
            }
            let read = Platform.receive(descriptor, into: extents.baseAddress!, count: used)
            var remaining = (try? read.get()) ?? 0
            for index in 0..<used {
                extents[index].iov_len = min(extents[index].iov_len, remaining)
                remaining -= extents[index].iov_len
            }
            // Committing zero bytes gives the reserved space back for the next read.
            _ = evbuffer_commit_space(raw, extents.baseAddress, Int32(used))
            return read
        }
    }

    /// Sends the front of the buffer on the socket (a writev of its blocks, with MSG_NOSIGNAL: a
    /// peer that has gone raises no SIGPIPE) and drops what was sent. Returns the count sent.
    func send(to descriptor: Int32) -> Result<Int, Errno> {
        let sent = withUnsafeTemporaryAllocation(of: iovec.self, capacity: EventBuffer.writeVectors) { vectors in
            // evbuffer_iovec is struct iovec where <sys/uio.h> exists: peeked blocks go to sendmsg as they are.
            let filled = Int(evbuffer_peek(raw, -1, nil, vectors.baseAddress, Int32(vectors.count)))
            return Platform.send(descriptor, vectors: vectors.baseAddress!, count: min(filled, vectors.count))
        }
        if case .success(let count) = sent, count > 0 { drain(count) }
        return sent
    }
}
