// The connection's reading settings from any thread: pausing, and the input limit.

import Synchronization

extension LoopConnection {
    /// Whether reading is paused: no bytes are read (the peer is slowed down by the kernel's
    /// window) and `onRead` is not called until it is resumed.
    ///
    /// Any thread.
    public var isReadingPaused: Bool {
        get { switches.contains(.readingPaused) }
        set {
            set(.readingPaused, newValue)
            pauseChanged(resumed: !newValue)
        }
    }

    /// After a pause setting changed: reading follows it on the loop's thread, and a resume
    /// delivers the input already buffered.
    func pauseChanged(resumed: Bool) {
        onLoop { connection in
            connection.updateInterest()
            if resumed { connection.scheduleDelivery() }
        }
    }

    /// How many unconsumed input bytes the connection holds before it stops reading (default
    /// `defaultInputLimit`, 1 MiB). A handler that never consumes therefore stalls its peer rather
    /// than growing memory without bound.
    ///
    /// Any thread. Less than 1 is a programmer error.
    public var inputLimit: Int {
        get { withSettings { $0.inputLimit } }
        set {
            precondition(newValue >= 1, "RunLoopKit: inputLimit must be at least 1, not \(newValue)")
            withSettings { $0.inputLimit = newValue }
            onLoop { $0.updateInterest() }
        }
    }
}
