// What timers, observers, custom sources and descriptor sources share: a few fields behind a lock
// word in the object (see `LockWord` for why), an owning loop, and the same ways of binding,
// unbinding, keeping a public object alive and being invalidated. Each kind keeps only what is its
// own: its fields (`State`), how it joins and leaves a mode's tables (`ModeMember`), and what
// invalidating it releases.

/// The fields of an item that its loop and other threads read under the item's lock word.
protocol ItemState {
    /// The link of the loop the item was added to, if any (an item does not keep its loop alive).
    var link: LoopLink? { get set }
    var isValid: Bool { get set }
}

extension ItemState {
    /// The item's loop, for a call after the lock is let go.
    var boundLoop: BoundLoop { link?.boundLoop ?? .none }
}

/// What an item embeds: its `State` and the lock word guarding it, inline in the item rather than
/// an object of their own: a timer is one allocation, its fields on the cache line of their lock
/// (296 instead of 360 bytes per timer against a `Locked` per timer, `runloop-bench`). Reached
/// through `WordLockedItem.withState` and `lockedState`.
///
/// Stored in the item as `@exclusivity(unchecked) var core`: the word guards it, which makes the
/// runtime's exclusivity checks redundant. The item's `membership` is a stored property beside it,
/// not in it: the loop's `state` lock guards that, and a Swift access to a stored property covers
/// all of it, so a membership change on one thread and a state change on another would overlap
/// (ThreadSanitizer reports them as an access race).
struct ItemCore<State>: ~Copyable {
    /// Only with the word held.
    var state: State
    private let word = LockWord()

    init(_ state: consuming State) { self.state = state }

    /// Borrowing, so that the item takes the word before its modifying access to the core begins:
    /// one begun before the word is held would overlap another thread's, as ThreadSanitizer
    /// reports.
    @inline(__always)
    func lock() { word.lock() }

    @inline(__always)
    func unlock() { word.unlock() }
}

/// An item whose state is guarded by a lock word in the object: it stores an `ItemCore`.
protocol WordLockedItem: ModeMember {
    associatedtype State: ItemState
    /// The state and its lock word.
    var core: ItemCore<State> { get set }
    /// Stops the item for good (the public `invalidate()`).
    func invalidate()
}

extension WordLockedItem {
    /// The state, with the lock word held for the length of the access. Any thread; an access must
    /// not call back into the item. For a caller that hands a closure out of the state, which
    /// `withState` would return through its generic result in a heap-allocated reabstraction thunk,
    /// a `malloc` per pass of a busy loop (docs/performance-notes.md#instructions-per-pass).
    var lockedState: State {
        @inline(__always) _read {
            core.lock()
            defer { core.unlock() }
            yield core.state
        }
        @inline(__always) _modify {
            core.lock()
            defer { core.unlock() }
            yield &core.state
        }
    }

    /// Runs `body` on the state with the lock word held. Any thread; `body` must not call back
    /// into the item.
    @inline(__always)
    func withState<R>(_ body: (inout State) -> R) -> R {
        body(&lockedState)
    }

    /// Binds the item to `loop` (an item belongs to one loop for its whole life); returns
    /// `extract(state)` read under the same lock.
    func bindState<R>(to loop: Loop, kind: String, _ extract: (State) -> R) -> R {
        withState { state in
            bindOwner(&state.link, to: loop.link, kind: kind)
            return extract(state)
        }
    }

    func unbind(from loop: Loop) {
        withState { unbindOwner(&$0.link, from: loop.link) }
    }

    /// Makes the loop keep `object` (the public object this item serves) alive while the item is
    /// in one of its modes. Before the item is first added.
    func keepAlive(_ object: AnyObject) {
        membership.keeper = ItemKeeper(object)
    }

    /// Marks the item invalid, `take` moving what the kind holds (its handler) out of the state
    /// into a variable of the caller under the same lock, then takes the item out of every mode of
    /// its loop. The caller lets go of what `take` moved out only after this returns: a handler's
    /// captures may call back into the item or its loop from their deinit, and neither lock is
    /// re-entrant. Idempotent.
    ///
    /// `take` is handed the item rather than capturing it: a closure capturing `self` made
    /// `LoopTimer.invalidate` retain and release the timer around the call, two of the atomic
    /// operations of a timer's life. The handler goes to a variable of its own type, not out
    /// through a generic result: a closure returned as a generic value, or handed to
    /// `withExtendedLifetime`, is wrapped in a reabstraction thunk allocated on the heap
    /// (docs/performance-notes.md#instructions-per-timer).
    @inline(__always)
    func retireItem(moving take: (Self, inout State) -> Void) {
        let loop: BoundLoop = withState { state in
            guard state.isValid else { return .none }
            state.isValid = false
            take(self, &state)
            return state.boundLoop
        }
        loop.use { loop, onLoopThread in loop.removeItemEverywhere(self, onLoopThread: onLoopThread) }
    }

    func loopDidTearDown() { invalidate() }
}
