/// A growable run of values in storage of its own, for a port's messages (`LoopPort`): appended
/// at the end, moved out one at a time from the front by index, forgotten all at once.
///
/// An `Array` would cost every append a uniqueness check, and its emptying a pass over elements
/// already moved out. The owner releases the storage (`release(from:)`): the buffer has no
/// deinit of its own, so that trading storage between two buffers is a plain swap.
struct PortBuffer<Element> {
    private var base: UnsafeMutablePointer<Element>?
    private(set) var count = 0
    private(set) var capacity = 0

    /// Buffers grown beyond this many elements by a burst are not kept for reuse.
    static var retainedCapacity: Int { 1 << 16 }

    init() {}

    @inline(__always)
    mutating func append(_ element: consuming Element) {
        if count == capacity { grow(to: max(capacity * 2, 16)) }
        (base.unsafelyUnwrapped + count).initialize(to: element)
        count += 1
    }

    /// Makes room for `minimum` elements in all.
    mutating func reserve(_ minimum: Int) {
        if minimum > capacity { grow(to: max(capacity * 2, minimum)) }
    }

    @inline(never)
    private mutating func grow(to newCapacity: Int) {
        let grown = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        if let base {
            grown.moveInitialize(from: base, count: count)
            base.deallocate()
        }
        base = grown
        capacity = newCapacity
    }

    /// Moves the element at `index` out; the caller never reads that slot again.
    @inline(__always)
    func take(at index: Int) -> Element {
        (base.unsafelyUnwrapped + index).move()
    }

    /// Counts the buffer empty, keeping its storage: every element must have been taken.
    mutating func removeAll() { count = 0 }

    /// Trades storage with `other`: elements, count and capacity.
    mutating func exchange(with other: inout PortBuffer) { swap(&self, &other) }

    /// Moves every element of `other` to the end of this buffer, leaving `other` empty.
    mutating func append(movingFrom other: inout PortBuffer) {
        guard other.count > 0 else { return }
        reserve(count + other.count)
        (base.unsafelyUnwrapped + count).moveInitialize(from: other.base.unsafelyUnwrapped, count: other.count)
        count += other.count
        other.count = 0
    }

    /// Destroys the elements from `index` on (the ones before were taken) and frees the storage,
    /// leaving an empty buffer with none.
    mutating func release(from index: Int) {
        if let base {
            (base + index).deinitialize(count: count - index)
            base.deallocate()
        }
        self = PortBuffer()
    }
}
