/// Bytes in a chain of blocks: what a connection has read and not consumed yet, or what to write.
///
/// Backed by libevent's evbuffer: reads land in it with `readv`, writes leave it with `writev`,
/// and moving one buffer into another (or into a connection's output) moves its blocks without
/// copying bytes. A value with copy-on-write; use one from one thread at a time.
public struct LoopBuffer {
    /// nil until the buffer first holds bytes: an empty buffer (such as the input of a connection
    /// that has read nothing yet) costs no allocation.
    var storage: EventBuffer?

    /// An empty buffer.
    ///
    /// Any thread.
    public init() { storage = nil }

    /// A buffer holding a copy of `bytes`.
    ///
    /// Any thread.
    public init(_ bytes: some Collection<UInt8>) {
        self.init()
        append(bytes)
    }

    /// The storage, made or copied first if there is none or another value shares it.
    mutating func unique() -> EventBuffer {
        if isKnownUniquelyReferenced(&storage), let storage { return storage }
        let fresh = storage?.copy() ?? EventBuffer()
        storage = fresh
        return fresh
    }

    /// Calls `body` with the storage, made or copied first if there is none or another value
    /// shares it. Lent, not returned: `unique()` hands out a reference, a retain and a release on
    /// every call (three a request in runloop-httpd).
    @inline(__always)
    mutating func withUnique<R>(_ body: (EventBuffer) throws -> R) rethrows -> R {
        if !isKnownUniquelyReferenced(&storage) { storage = storage?.copy() ?? EventBuffer() }
        return try body(storage.unsafelyUnwrapped)
    }

    /// The storage, unshared, leaving this buffer empty (and with no storage).
    mutating func take() -> EventBuffer {
        defer { storage = nil }
        return unique()
    }

    /// The number of bytes held.
    public var count: Int { storage?.count ?? 0 }

    /// Whether no bytes are held.
    public var isEmpty: Bool { count == 0 }

    /// Appends a copy of `bytes`.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        if bytes.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) == nil {
            Array(bytes).withUnsafeBytes { append($0) }
        }
    }

    /// Appends a copy of the bytes at `bytes`.
    ///
    /// Not generic, unlike `append(_:)` for collections: callable from another module without a
    /// generic call through `withContiguousStorageIfAvailable`.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        withUnique { $0.append(bytes) }
    }

    /// Moves every byte of `other` to the end of this buffer, leaving `other` empty: no copy.
    public mutating func append(_ other: inout LoopBuffer) {
        guard !other.isEmpty else { return }
        guard !isEmpty else {
            // Nothing here yet: this buffer takes the other's storage as it is.
            storage = other.storage
            other.storage = nil
            return
        }
        unique().moveAll(from: other.unique())
    }

    /// Removes and returns up to `maxLength` bytes from the front.
    ///
    /// A negative `maxLength` is a programmer error.
    public mutating func read(maxLength: Int) -> [UInt8] {
        precondition(
            maxLength >= 0, "RunLoopKit: LoopBuffer.read(maxLength:) needs a length of 0 or more, not \(maxLength)")
        guard !isEmpty else { return [] }
        return unique().remove(maxLength: maxLength)
    }

    /// Removes and returns the first line, up to a LF (or CRLF), without the line ending; nil if
    /// the buffer holds no complete line (nothing is removed then).
    public mutating func readLine() -> [UInt8]? {
        guard !isEmpty else { return nil }
        return unique().readLine()
    }

    /// The offset of the first occurrence of `pattern`, or nil (an empty pattern is found at 0).
    public func firstIndex(of pattern: some Collection<UInt8>) -> Int? {
        guard let storage else { return pattern.isEmpty ? 0 : nil }
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
        guard count > 0 else { return }
        withUnique { $0.drain(count) }
    }

    /// Calls `body` with the first `count` bytes (fewer if the buffer holds fewer) in one
    /// contiguous region, joining blocks only when they span several. Nothing is removed.
    ///
    /// A negative count is a programmer error.
    public mutating func withContiguousBytes<R>(
        upTo count: Int, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        precondition(count >= 0, "RunLoopKit: LoopBuffer.withContiguousBytes(upTo:) needs 0 or more, not \(count)")
        guard !isEmpty else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try withUnique { try $0.withContiguousBytes(upTo: count, body) }
    }
}
