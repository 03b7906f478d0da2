import Synchronization

/// What any thread may read and change of a connection: where it lives (`Residency`) and its
/// settings, each stored once, under the connection's one lock word (`SettingsWord`, a word in the
/// connection rather than a `Locked`, a pthread mutex in an allocation of its own: a server holds
/// thousands of connections, mostly idle; docs/performance-notes.md#memory-per-connection). The
/// switches (`SettingsWord.Switches`) are bits of the lock word itself, which the loop's thread
/// reads on every event without taking it; the rest is in this struct, guarded by the word. The
/// loop's thread reads them as it needs them: a setter changes the value, then posts what follows
/// from it to the loop (`updateInterest`, a delivery, the deadline, the watermarks' check).
struct ConnectionSettings {
    var residency: Residency
    /// `inputLimit`.
    var inputLimit = LoopConnection.defaultInputLimit
    /// The settings most connections leave alone, made the first time one is set.
    private var rare: Rare?

    /// `writeWatermarks` and `idleTimeout` as set.
    final class Rare {
        var watermarks = LoopConnection.defaultWriteWatermarks
        var idleTimeout: Duration?
    }

    init(residency: Residency) { self.residency = residency }

    /// `writeWatermarks`.
    var watermarks: (low: Int, high: Int) {
        get { rare?.watermarks ?? LoopConnection.defaultWriteWatermarks }
        set { changeRare { $0.watermarks = newValue } }
    }

    /// `idleTimeout`.
    var idleTimeout: Duration? {
        get { rare?.idleTimeout }
        set { changeRare { $0.idleTimeout = newValue } }
    }

    /// Whether the rare settings were made (`LoopConnection.holdsOptionalState`).
    var hasRareSettings: Bool { rare != nil }

    private mutating func changeRare(_ body: (Rare) -> Void) {
        if rare == nil { rare = Rare() }
        body(rare!)
    }
}

/// A connection's lock word: bit 0 is the lock, which guards its `ConnectionSettings`; the other
/// bits are the switches read on every event (`Switches`), which any thread reads without taking
/// the lock, and only the lock's holder changes (it stores them as it unlocks). Uncontended, a lock
/// is one compare-and-exchange and an unlock a store, as `LockWord`'s.
struct SettingsWord: ~Copyable, @unchecked Sendable {
    private let word = Atomic<UInt32>(0)
    private static let locked: UInt32 = 1

    /// The settings that are one bit each.
    struct Switches: OptionSet {
        let rawValue: UInt32
        /// `isReadingPaused`.
        static let readingPaused = Switches(rawValue: 1 << 1)
        /// `pausesReadingWhileUnwritable`.
        static let pausesWhileUnwritable = Switches(rawValue: 1 << 2)
        /// `allowsHalfClosure`.
        static let allowsHalfClosure = Switches(rawValue: 1 << 3)
    }

    /// The switches now, without the lock. Any thread.
    @inline(__always)
    var switches: Switches { Switches(rawValue: word.load(ordering: .acquiring) & ~SettingsWord.locked) }

    /// Runs `body` holding the lock, with the switches to change. `body` must not take it again.
    @inline(__always)
    func withLock<R>(_ body: (inout Switches) -> R) -> R {
        var current = word.load(ordering: .relaxed)
        if current & SettingsWord.locked != 0
            || !word.compareExchange(expected: current, desired: current | SettingsWord.locked, ordering: .acquiring)
                .exchanged
        {
            current = lockContended()
        }
        var switches = Switches(rawValue: current)
        let result = body(&switches)
        word.store(switches.rawValue & ~SettingsWord.locked, ordering: .releasing)
        return result
    }

    /// Takes the lock from another holder: returns the word as it was.
    @inline(never)
    private func lockContended() -> UInt32 {
        var wait = SpinWait()
        while true {
            let current = word.load(ordering: .relaxed)
            if current & SettingsWord.locked == 0,
                word.compareExchange(expected: current, desired: current | SettingsWord.locked, ordering: .acquiring)
                    .exchanged
            {
                return current
            }
            wait.pause()
        }
    }
}
