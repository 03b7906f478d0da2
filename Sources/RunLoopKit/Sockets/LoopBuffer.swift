/// Bytes in a chain of blocks: what a connection has read and not consumed yet, or what to write.
///
/// Backed by libevent's evbuffer: reads land in it with `readv`, writes leave it with `writev`,
/// and moving one buffer into another (or into a connection's output) moves its blocks without
/// copying bytes. A value with copy-on-write; use one from one thread at a time.
public struct LoopBuffer {
    var storage: EventBuffer

    /// An empty buffer.
    ///
    /// Any thread.
    public init() { storage = EventBuffer() }

    /// A buffer holding a copy of `bytes`.
    ///
    /// Any thread.
    public init(_ bytes: some Collection<UInt8>) {
        self.init()
        append(bytes)
    }

    /// The storage, copied first if another value shares it.
    mutating func unique() -> EventBuffer {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    /// The number of bytes held.
    public var count: Int { storage.count }

    /// Whether no bytes are held.
    public var isEmpty: Bool { storage.count == 0 }

    /// Appends a copy of `bytes`.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        let storage = unique()
        if bytes.withContiguousStorageIfAvailable({ storage.append(UnsafeRawBufferPointer($0)) }) == nil {
            Array(bytes).withUnsafeBytes { storage.append($0) }
        }
    }

    /// Moves every byte of `other` to the end of this buffer, leaving `other` empty: no copy.
    public mutating func append(_ other: inout LoopBuffer) {
        unique().moveAll(from: other.unique())
    }

    /// Removes and returns up to `maxLength` bytes from the front.
    ///
    /// A negative `maxLength` is a programmer error.
    public mutating func read(maxLength: Int) -> [UInt8] {
        precondition(
            maxLength >= 0, "RunLoopKit: LoopBuffer.read(maxLength:) needs a length of 0 or more, not \(maxLength)")
        return unique().remove(maxLength: maxLength)
    }

    /// Removes and returns the first line, up to a LF (or CRLF), without the line ending; nil if
    /// the buffer holds no complete line (nothing is removed then).
    public mutating func readLine() -> [UInt8]? {
        unique().readLine()
    }

    /// The offset of the first occurrence of `pattern`, or nil (an empty pattern is found at 0).
    public func firstIndex(of pattern: some Collection<UInt8>) -> Int? {
        let storage = self.storage
        return pattern.withContiguousStorageIfAvailable { storage.firstIndex(of: UnsafeRawBufferPointer($0)) }
            ?? Array(pattern).withUnsafeBytes { storage.firstIndex(of: $0) }
    }

    /// Drops the first `count` bytes.
    ///
    /// A negative count, or more than the buffer holds, is a programmer error.
    public mutating func consume(_ count: Int) {
        precondition(
            count >= 0 && count <= self.count,
            "RunLoopKit: LoopBuffer.consume(\(count)) on a buffer of \(self.count) bytes; consume 0...count")
        unique().drain(count)
    }

    /// Calls `body` with the first `count` bytes (fewer if the buffer holds fewer) in one
    /// contiguous region, joining blocks only when they span several. Nothing is removed.
    ///
    /// A negative count is a programmer error.
    public mutating func withContiguousBytes<R>(
        upTo count: Int, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        precondition(count >= 0, "RunLoopKit: LoopBuffer.withContiguousBytes(upTo:) needs 0 or more, not \(count)")
        return try unique().withContiguousBytes(upTo: count, body)
    }
}
