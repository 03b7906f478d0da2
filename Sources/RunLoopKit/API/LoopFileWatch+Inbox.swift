// A file watch's changes between the loop's reading of its inotify descriptor and the watch's
// handler: the reader appends, the watch's source takes them when one of its modes runs.

/// The changes waiting for a watch's handler, and what the loop's hub knows of the watch.
final class FileWatchInbox: Sendable {
    /// The most changes that wait for a watch: past it they are dropped and one `overflow` stands
    /// for them (a watch whose modes do not run must not hold memory without bound). More than one
    /// callout of the reader can bring (16 reads of 64 KiB, 16 bytes an event at least), so that a
    /// watch in the running mode never reaches it.
    static let capacity = 65536

    private struct State {
        /// The watch, for its handler (weak: the watch holds its source, which holds this).
        weak var watch: LoopFileWatch?
        var pending: [LoopFileWatch.Change] = []
        /// An `overflow` stands at the end of `pending` for changes dropped since.
        var overflowed = false
        /// The kernel's watch descriptor while the loop's hub watches the path for it.
        var descriptor: Int32?
        /// The watch has reported, or is about to report, `watchedItemGone`: it is not watched again.
        var ended = false
        var error: LoopError?
    }

    private let state = Locked(State())

    func attach(_ watch: LoopFileWatch) {
        state.withLock { $0.watch = watch }
    }

    var error: LoopError? { state.withLock { $0.error } }

    /// Whether the hub watches the path for the watch: its watch descriptor.
    var descriptor: Int32? { state.withLock { $0.descriptor } }

    /// Whether the hub may start watching the path for the watch.
    var mayRegister: Bool { state.withLock { $0.descriptor == nil && !$0.ended } }

    /// The hub watches the path for the watch under `descriptor`.
    func register(_ descriptor: Int32) {
        state.withLock { $0.descriptor = descriptor }
    }

    /// The hub stopped watching for the watch (it left its last mode, or was invalidated): the
    /// changes not delivered are dropped. Returns the watch descriptor it had.
    func unregister() -> Int32? {
        state.withLock { state in
            defer {
                state.descriptor = nil
                if !state.ended {
                    state.pending = []
                    state.overflowed = false
                }
            }
            return state.descriptor
        }
    }

    /// Queues `change`, unless the watch has ended (nothing is queued after its end).
    func append(_ change: LoopFileWatch.Change) {
        state.withLock { FileWatchInbox.append(change, to: &$0) }
    }

    /// Queues `changes`, in order, under one lock.
    func append(contentsOf changes: [LoopFileWatch.Change]) {
        state.withLock { state in
            for change in changes { FileWatchInbox.append(change, to: &state) }
        }
    }

    private static func append(_ change: LoopFileWatch.Change, to state: inout State) {
        guard !state.ended else { return }
        if change.kind == .watchedItemGone {
            state.ended = true
            state.descriptor = nil
        } else if state.overflowed {
            return
        } else if state.pending.count >= FileWatchInbox.capacity {
            state.overflowed = true
            state.pending.append(LoopFileWatch.Change(name: nil, kind: .overflow))
            return
        }
        state.pending.append(change)
    }

    /// The path could not be watched when the watch was added: `watchedItemGone`, with the error.
    func fail(_ error: LoopError) {
        state.withLock { $0.error = error }
        append(LoopFileWatch.Change(name: nil, kind: .watchedItemGone))
    }

    /// Loop thread, from the watch's source: hands the waiting changes to `handler`, then ends
    /// the watch if they end with `watchedItemGone`.
    func deliver(_ handler: (LoopFileWatch, [LoopFileWatch.Change]) -> Void) {
        let (watch, changes) = state.withLock { state in
            defer {
                state.pending = []
                state.overflowed = false
            }
            return (state.watch, state.pending)
        }
        guard let watch, !changes.isEmpty else { return }
        handler(watch, changes)
        if changes.last?.kind == .watchedItemGone { watch.invalidate() }
    }
}
