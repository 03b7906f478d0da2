/// A growable byte buffer with a read index and a write index, reused for the life of a connection.
///
/// Readable bytes are `[readIndex, writeIndex)`. Consuming everything resets both indices to zero,
/// so a buffer that is drained after each batch never moves bytes; `compact()` moves a leftover
/// partial message to the front. Storage is allocated on first use and grows by doubling. Not
/// thread-safe.
///
/// The indices live behind a pointer rather than in stored properties: the hot path of a server
/// touches them several times per request, and stored `var`s of a class would each cost a dynamic
/// exclusivity check.
public final class HTTPByteBuffer {
    @usableFromInline struct Header {
        @usableFromInline var base: UnsafeMutableRawPointer?
        @usableFromInline var capacity: Int
        @usableFromInline var readIndex = 0
        @usableFromInline var writeIndex = 0

        @usableFromInline init(capacity: Int) { self.capacity = capacity }
    }

    @usableFromInline let header: UnsafeMutablePointer<Header>

    /// A buffer that allocates `capacity` bytes when first written to.
    public init(capacity: Int) {
        precondition(capacity > 0, "HTTPByteBuffer: capacity must be positive")
        header = .allocate(capacity: 1)
        header.initialize(to: Header(capacity: capacity))
    }

    deinit {
        header.pointee.base?.deallocate()
        header.deinitialize(count: 1)
        header.deallocate()
    }

    /// The number of readable bytes.
    @inlinable public var count: Int { header.pointee.writeIndex &- header.pointee.readIndex }

    /// Whether there is nothing to read.
    @inlinable public var isEmpty: Bool { header.pointee.writeIndex == header.pointee.readIndex }

    /// The readable bytes; valid until the buffer is next changed.
    @inlinable public var readableBytes: UnsafeRawBufferPointer {
        let h = header.pointee
        guard let base = h.base else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base + h.readIndex, count: h.writeIndex &- h.readIndex)
    }

    /// The free space after the readable bytes (allocating the storage if needed); write into it,
    /// then `commit` the number of bytes written.
    @inlinable public var writableSpace: UnsafeMutableRawBufferPointer {
        let base = header.pointee.base ?? allocate()
        let h = header.pointee
        return UnsafeMutableRawBufferPointer(start: base + h.writeIndex, count: h.capacity &- h.writeIndex)
    }

    /// Makes `count` bytes written into `writableSpace` readable.
    @inlinable public func commit(_ count: Int) {
        precondition(
            count >= 0 && count <= header.pointee.capacity &- header.pointee.writeIndex,
            "HTTPByteBuffer: commit past the end")
        header.pointee.writeIndex &+= count
    }

    /// Drops the first `count` readable bytes.
    @inlinable public func consume(_ count: Int) {
        precondition(count >= 0 && count <= self.count, "HTTPByteBuffer: consume past the end")
        header.pointee.readIndex &+= count
        if header.pointee.readIndex == header.pointee.writeIndex {
            header.pointee.readIndex = 0
            header.pointee.writeIndex = 0
        }
    }

    /// Drops every readable byte.
    @inlinable public func removeAll() {
        header.pointee.readIndex = 0
        header.pointee.writeIndex = 0
    }

    /// Moves the readable bytes to the front, making all the free space contiguous.
    @inlinable public func compact() {
        let h = header.pointee
        guard h.readIndex > 0, let base = h.base else { return }
        let count = h.writeIndex &- h.readIndex
        if count > 0 { base.copyMemory(from: base + h.readIndex, byteCount: count) }
        header.pointee.readIndex = 0
        header.pointee.writeIndex = count
    }

    /// Appends `bytes`, growing the storage if needed.
    @inlinable public func append(_ bytes: UnsafeRawBufferPointer) {
        let length = bytes.count
        guard length > 0, let source = bytes.baseAddress else { return }
        if header.pointee.capacity &- header.pointee.writeIndex < length || header.pointee.base == nil {
            reserve(length)
        }
        let h = header.pointee
        (h.base.unsafelyUnwrapped + h.writeIndex).copyMemory(from: source, byteCount: length)
        header.pointee.writeIndex = h.writeIndex &+ length
    }

    /// Appends `bytes` (a convenience for tests and tools).
    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Makes room for `extra` more bytes after the readable ones: compacts, then grows if needed.
    @usableFromInline func reserve(_ extra: Int) {
        if header.pointee.base == nil { allocate() }
        compact()
        let writeIndex = header.pointee.writeIndex
        var capacity = header.pointee.capacity
        guard capacity - writeIndex < extra else { return }
        while capacity - writeIndex < extra { capacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        if let base = header.pointee.base {
            newBase.copyMemory(from: base, byteCount: writeIndex)
            base.deallocate()
        }
        header.pointee.base = newBase
        header.pointee.capacity = capacity
    }

    @usableFromInline @discardableResult func allocate() -> UnsafeMutableRawPointer {
        let base = UnsafeMutableRawPointer.allocate(byteCount: header.pointee.capacity, alignment: 16)
        header.pointee.base = base
        return base
    }
}
