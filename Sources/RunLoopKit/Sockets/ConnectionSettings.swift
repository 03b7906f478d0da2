/// What any thread may read and change of a connection: where it lives (`Residency`) and its
/// settings, each stored once, under the connection's one lock word (`LoopConnection.withSettings`,
/// a word in the connection rather than a `Locked`, a pthread mutex in an allocation of its own:
/// a server holds thousands of connections, mostly idle;
/// docs/performance-notes.md#memory-per-connection). The loop's thread reads them there too, as
/// it needs them: a setter changes the value, then posts what follows from it to the loop
/// (`updateInterest`, a delivery, the deadline, the watermarks' check).
struct ConnectionSettings {
    var residency: Residency
    /// `isReadingPaused`.
    var readingPaused = false
    /// `allowsHalfClosure`.
    var allowsHalfClosure = false
    /// `pausesReadingWhileUnwritable`.
    var pausesWhileUnwritable = false
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

    /// Whether reading is paused: by `isReadingPaused`, or by the output while it is at or above
    /// the high watermark (`pausesReadingWhileUnwritable`), which `belowHighWatermark` says.
    @inline(__always)
    func pausesReading(belowHighWatermark: Bool) -> Bool {
        readingPaused || (pausesWhileUnwritable && !belowHighWatermark)
    }

    private mutating func changeRare(_ body: (Rare) -> Void) {
        if rare == nil { rare = Rare() }
        body(rare!)
    }
}
