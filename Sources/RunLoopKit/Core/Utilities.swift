// Generic helpers the library's parts share: a box for the hop to a loop's thread, a reference set
// once, and padding that keeps fields on cache lines of their own.

import Synchronization

/// Carries a value the loop thread alone will use across the hop to it.
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A reference set at most once and read from any thread, retained while its holder lives: what
/// `AtomicLazyReference` does, on an `Atomic` of `Unmanaged`, which the compiler inlines: a
/// connection reads its optional state on every read and write, and `AtomicLazyReference.load` is
/// a call into the Synchronization library that looks up generic metadata each time
/// (docs/performance-notes.md#instructions-per-request).
struct OnceReference<Object: AnyObject>: ~Copyable, @unchecked Sendable {
    private let slot = Atomic<Unmanaged<Object>?>(nil)

    init() {}

    deinit { slot.load(ordering: .acquiring)?.release() }

    /// The object, once set.
    @inline(__always)
    func load() -> Object? { slot.load(ordering: .acquiring)?.takeUnretainedValue() }

    /// Sets `object` unless an object is set already; returns the one set.
    func storeIfNil(_ object: Object) -> Object {
        let made = Unmanaged.passRetained(object)
        let (exchanged, original) = slot.compareExchange(
            expected: nil, desired: made, ordering: .acquiringAndReleasing)
        guard exchanged else {
            made.release()
            return original!.takeUnretainedValue()
        }
        return object
    }
}

/// 64 bytes of nothing, stored between fields that different processors write so that they never
/// share a cache line.
struct CacheLinePadding {
    private let words: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
}
