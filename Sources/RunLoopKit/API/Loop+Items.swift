// Adding, removing and querying items. Any thread may call these: the tables are guarded by the
// loop's lock, and a loop that is asleep is woken so it re-arms its wake-up time.
//
// A loop keeps what it holds: an item stays alive while it is in one of the loop's modes, with no
// other reference to it, and goes with its last reference once it is in none. Adding to a loop
// that has ended does nothing and leaves the item free for another loop.

extension Loop {
    /// Adds `timer` to `mode` (`.common`: every common mode, now and later).
    ///
    /// Any thread. The loop keeps the timer until it is removed from every mode or invalidated.
    /// Adding it again to a mode it is in, adding an invalidated timer, or adding to a loop that
    /// has ended does nothing. A timer belongs to one loop: adding it to a second loop is a
    /// programmer error.
    public func add(_ timer: LoopTimer, forMode mode: Mode) {
        guard let schedule = timer.bind(to: self) else { return }
        insertItem(timer, forMode: mode) { timer.join(&$0, sequence: $1, bound: schedule) }
    }

    /// Removes `timer` from `mode` (`.common`: from every common mode) without invalidating it.
    ///
    /// Any thread. Removing a timer that is not there does nothing.
    public func remove(_ timer: LoopTimer, forMode mode: Mode) { removeItem(timer, forMode: mode) }

    /// Whether `timer` is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ timer: LoopTimer, inMode mode: Mode) -> Bool { containsItem(timer, inMode: mode) }

    /// Adds `observer` to `mode` (`.common`: every common mode, now and later).
    ///
    /// Any thread. The loop keeps the observer until it is removed from every mode or
    /// invalidated. Adding it again to a mode it is in, or adding to a loop that has ended, does
    /// nothing. An observer belongs to one loop: adding it to a second loop is a programmer error.
    public func add(_ observer: LoopObserver, forMode mode: Mode) {
        if observer.bind(to: self) { insertItem(observer, forMode: mode) }
    }

    /// Removes `observer` from `mode` without invalidating it.
    ///
    /// Any thread. Removing an observer that is not there does nothing.
    public func remove(_ observer: LoopObserver, forMode mode: Mode) { removeItem(observer, forMode: mode) }

    /// Whether `observer` is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ observer: LoopObserver, inMode mode: Mode) -> Bool { containsItem(observer, inMode: mode) }

    /// Adds `source` to `mode` (`.common`: every common mode, now and later).
    ///
    /// Any thread. The loop keeps the source until it is removed from every mode or invalidated.
    /// Adding it again to a mode it is in, or adding to a loop that has ended, does nothing. A
    /// source that is already signalled is performed when a mode holding it runs. A source belongs
    /// to one loop: adding it to a second loop is a programmer error.
    public func add(_ source: LoopSource, forMode mode: Mode) {
        let (valid, signalled) = source.bind(to: self)
        guard valid, insertItem(source, forMode: mode) else { return }
        if signalled { sourceWasSignalled(port: source.isPort) }
    }

    /// Removes `source` from `mode` without invalidating it; a pending signal stays pending.
    ///
    /// Any thread. Removing a source that is not there does nothing.
    public func remove(_ source: LoopSource, forMode mode: Mode) { removeItem(source, forMode: mode) }

    /// Whether `source` is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ source: LoopSource, inMode mode: Mode) -> Bool { containsItem(source, inMode: mode) }
}
