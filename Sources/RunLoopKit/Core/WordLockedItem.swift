// What timers, observers and custom sources share: a few fields behind a lock word in the object
// (see `LockWord` for why), an owning loop, and the same ways of binding, unbinding, keeping a
// public object alive and being invalidated.

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

/// An item whose state is guarded by a lock word in the object.
protocol WordLockedItem: ModeMember {
    associatedtype State: ItemState
    /// Runs `body` on the state with the lock word held. Any thread; `body` must not call back
    /// into the item.
    func withState<R>(_ body: (inout State) -> R) -> R
    /// Stops the item for good (the public `invalidate()`).
    func invalidate()
}

extension WordLockedItem {
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

    /// Marks the item invalid, `release` taking what the kind holds (its handler) out of the state
    /// under the same lock, then takes the item out of every mode of its loop, and only then lets
    /// go of what `release` returned: a handler's captures may call back into the item or its loop
    /// from their deinit, and neither lock is re-entrant. Idempotent.
    ///
    /// `release` is handed the item rather than capturing it: a closure capturing `self` made
    /// `LoopTimer.invalidate` retain and release the timer around the call, two of the atomic
    /// operations of a timer's life (callgrind, `runloop-bench --filter churn`: with the cheaper
    /// `.common` check and `compactIfSparse`, 1,982 → 1,880 instructions per timer). Generic over
    /// what it returns, so the handler is moved out, not boxed.
    @inline(__always)
    func invalidateItem<Dropped>(_ release: (Self, inout State) -> Dropped?) {
        let (loop, dropped): (BoundLoop, Dropped?) = withState { state in
            guard state.isValid else { return (.none, nil) }
            state.isValid = false
            let dropped = release(self, &state)
            return (state.boundLoop, dropped)
        }
        loop.use { loop, onLoopThread in loop.removeItemEverywhere(self, onLoopThread: onLoopThread) }
        withExtendedLifetime(dropped) {}
    }

    func loopDidTearDown() { invalidate() }
}
