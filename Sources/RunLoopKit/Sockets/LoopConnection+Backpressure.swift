// Reading that follows the output (`pausesReadingWhileUnwritable`): a server whose replies are far
// larger than its requests stops taking requests while its replies wait to go out.

extension LoopConnection {
    /// Whether reading pauses while the queued output is at or above the high watermark of
    /// `writeWatermarks` (`isWritable` false) and resumes once it falls to the low one, as
    /// SwiftNIO's `BackPressureHandler` does; false by default.
    ///
    /// While paused this way nothing is read and `onRead` is not called: the peer is slowed down
    /// by the kernel's window, so a server that answers pipelined requests with large replies
    /// holds at most the high watermark and the replies of one call of its handler. When the output
    /// falls to the low watermark (as `writable` is reported), reading resumes, beginning with the
    /// input already buffered, delivered on a later pass. A handler that answers one request at a
    /// time and stops once `isWritable` is false (`while connection.isWritable, let line =
    /// buffer.readLine()`) holds the high watermark and one reply at most; the requests it left in
    /// the buffer come back to it on resume. It composes with `isReadingPaused`: reading goes on
    /// only while neither pauses it. A peer's reset or end of stream is still noticed while paused
    /// (as with `isReadingPaused`).
    ///
    /// Any thread; applied on the loop's thread, in each calling thread's order.
    public var pausesReadingWhileUnwritable: Bool {
        get { switches.contains(.pausesWhileUnwritable) }
        set {
            set(.pausesWhileUnwritable, newValue)
            pauseChanged(resumed: !newValue)
        }
    }

    /// The output fell to the low watermark (`writable` was reported): a connection paused by its
    /// output reads again, beginning with the input it holds. Loop thread only.
    func outputBecameWritable() {
        let switches = self.switches
        guard switches.contains(.pausesWhileUnwritable), !switches.contains(.readingPaused) else { return }
        scheduleDelivery()
    }
}
