// Adding and removing items, from any thread: the tables change under the loop's `state` lock,
// a loop that is asleep is woken so it re-arms its wake-up time, and whatever a change releases
// (the object an item served, heaps of stale timers) goes after the lock, since a deinit may call
// into the loop.

extension Loop {
    /// Adds `item` to `mode`, where `.common` means the common set. Any thread.
    ///
    /// Returns false, adding nothing, if the loop has ended: the item is then unbound from it, so
    /// that it can be added to another loop.
    @discardableResult
    func insertItem(_ item: some ModeMember, forMode mode: Mode) -> Bool {
        insertItem(item, forMode: mode) { item.join(&$0, sequence: $1) }
    }

    /// `insertItem(_:forMode:)`, `join` entering the item into each mode's tables.
    @discardableResult
    @inline(__always)
    func insertItem(
        _ item: some ModeMember, forMode mode: Mode, joining join: (inout ModeItems, UInt64) -> Void
    ) -> Bool {
        let added = withTables { state in
            guard !state.ended else { return false }
            state.add(item, forMode: mode, joining: join)
            _ = item.updateKeeper()  // never returns an object when adding
            return true
        }
        guard added else {
            item.unbind(from: self)
            return false
        }
        wakeUpIfForeign()
        return true
    }

    /// Removes `item` from `mode`, where `.common` means every mode of the common set. Any thread.
    func removeItem(_ item: some ModeMember, forMode mode: Mode) {
        changeMembership(of: item) { $0.remove(item, forMode: mode) }
    }

    /// Removes an invalidated item from every mode. Any thread; `onLoopThread` when the caller
    /// already knows it runs on the loop's thread (no wake-up then).
    func removeItemEverywhere(_ item: some ModeMember, onLoopThread: Bool = false) {
        changeMembership(of: item, onLoopThread: onLoopThread) { $0.removeEverywhere(item) }
    }

    private func changeMembership(
        of item: some ModeMember, onLoopThread: Bool = false, _ change: (inout ModeTable) -> Void
    ) {
        let released: (AnyObject?, ([TimerHeap], [TimerHeap.Entry])) = state.withLock { state in
            change(&state)
            // Almost always empty (a mode lost its last timer): not copied and reset then.
            guard state.hasGarbage else { return (item.updateKeeper(), ([], [])) }
            return (item.updateKeeper(), state.takeGarbage())
        }
        // Only descriptor sources' removals matter to a batch of ready descriptors.
        if item is LoopDescriptorSource { removals.add(1, ordering: .releasing) }
        if !onLoopThread { wakeUpIfForeign() }
        withExtendedLifetime(released) {}
    }

    /// Runs `body` on the tables under `state`, then releases what it dropped (stale heap entries,
    /// heaps of a mode that lost its last timer) after the lock: a removed timer's last reference
    /// may be among them, and its handler's captures may call into the loop as they go.
    @inline(__always)
    func withTables<R>(_ body: (inout ModeTable) -> R) -> R {
        var garbage: ([TimerHeap], [TimerHeap.Entry]) = ([], [])
        let result = state.withLock { state in
            let result = body(&state)
            if state.hasGarbage { garbage = state.takeGarbage() }
            return result
        }
        withExtendedLifetime(garbage) {}
        return result
    }

    func containsItem(_ item: some ModeMember, inMode mode: Mode) -> Bool {
        state.withLock { $0.contains(item, in: mode) }
    }

    /// Pushes a rescheduled timer's new entries into the heaps of every mode holding it. Any thread.
    func timerDidReschedule(_ timer: LoopTimer) {
        withTables { state in
            let modes = timer.membership.modes
            guard !modes.isEmpty else { return }
            let schedule = timer.schedule
            for slot in modes {
                let sequence = state.sequence()
                state.withItems(in: slot) { $0.push(timer, schedule, sequence: sequence) }
            }
        }
        wakeUpIfForeign()
    }
}
