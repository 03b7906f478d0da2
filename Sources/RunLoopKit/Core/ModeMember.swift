// The kinds of item a mode holds, each saying how it joins and leaves a mode's tables; the
// tables (`ModeTable`) do the rest, the same for every kind.

/// An item a mode can hold: a timer, an observer, a custom source (ports are custom sources) or a
/// descriptor source. Its `membership` is read and written only under its loop's `state` lock.
protocol ModeMember: AnyObject {
    /// The modes of its loop the item is in.
    var membership: Membership { get set }
    /// Enters a mode's tables (it was not there); `sequence` orders it among the mode's items.
    func join(_ items: inout ModeItems, sequence: UInt64)
    /// Leaves a mode's tables (it was there); heaps it left wholly stale go to `garbage`, for the
    /// caller to release after the lock. Appended rather than returned: a returned array, empty
    /// almost always, would be released on every removal (docs/performance-notes.md#instructions-per-timer).
    func leave(_ items: inout ModeItems, garbage: inout [TimerHeap])
    /// Forgets `loop` as its owner, after an add the ended loop refused.
    func unbind(from loop: Loop)
    /// The loop's thread exited: the item is invalidated.
    func loopDidTearDown()
}

extension ModeMember {
    /// After a change of membership: the object the item serves, if it has just left its last
    /// mode (release it outside the lock).
    func updateKeeper() -> AnyObject? {
        membership.keeper?.update(inAMode: !membership.isEmpty)
    }
}

extension LoopTimer: TickHeapElement {
    /// Under the loop's `state` lock, like `membership`.
    @inline(__always)
    func trackedEntryMoved(to index: Int, as track: TickHeapTrack) {
        if track == .second {
            membership.trackedLatest = Int32(truncatingIfNeeded: index)
        } else {
            membership.trackedEntry = Int32(truncatingIfNeeded: index)
        }
    }
}

extension LoopTimer: WordLockedItem {
    func join(_ items: inout ModeItems, sequence: UInt64) {
        join(&items, sequence: sequence, bound: schedule)
    }

    /// Joins with `bound`, the schedule read when the timer was bound, if it is still the
    /// timer's: every change of schedule (a reschedule, a claim, an invalidation) moves
    /// `liveGeneration` under the timer's lock, and one this load does not see pushes its own
    /// entries after this lock is let go (`timerDidReschedule`). Otherwise reads it again. Saves
    /// adding a timer its second lock word acquisition, an atomic operation
    /// (docs/performance-notes.md#instructions-per-timer).
    func join(_ items: inout ModeItems, sequence: UInt64, bound: Schedule) {
        let current = liveGeneration.load(ordering: .acquiring) == bound.generation ? bound : schedule
        items.timerCount += 1
        items.push(self, current, sequence: sequence)
    }

    func leave(_ items: inout ModeItems, garbage: inout [TimerHeap]) {
        // Its tracked entry goes now; the others go stale (membership no longer names the mode).
        items.timerCount -= 1
        items.removeTrackedEntry(of: self)
        guard items.timerCount == 0, items.hasHeapEntries else {
            items.compactIfSparse()
            return
        }
        // No timer left, so every entry is stale: drop them now, so that a removed timer goes
        // with the caller's last reference to it.
        garbage.append(contentsOf: items.takeHeaps())
    }
}

extension LoopObserver: WordLockedItem {
    func join(_ items: inout ModeItems, sequence: UInt64) {
        positions[items.slot] = sequence
        items.insertObserver(self, sequence: sequence)
    }

    func leave(_ items: inout ModeItems, garbage: inout [TimerHeap]) {
        items.removeObserver(self, sequence: positions.remove(items.slot))
    }
}

extension LoopSource: WordLockedItem, SlottedItem {
    func join(_ items: inout ModeItems, sequence: UInt64) {
        items.sources.insert(self, in: items.slot)
    }

    func leave(_ items: inout ModeItems, garbage: inout [TimerHeap]) {
        items.sources.remove(self, from: items.slot)
    }
}

extension LoopDescriptorSource: WordLockedItem, SlottedItem {
    func join(_ items: inout ModeItems, sequence: UInt64) {
        items.descriptors.insert(self, in: items.slot)
    }

    func leave(_ items: inout ModeItems, garbage: inout [TimerHeap]) {
        items.descriptors.remove(self, from: items.slot)
    }
}
