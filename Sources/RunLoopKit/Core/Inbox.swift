import Glibc
import Synchronization

/// What other threads hand a loop: posted blocks, and the wake-up that tells the loop to look.
/// One component owns both, behind one lock word, as one state machine.
///
/// Other threads never touch libevent. They append a block here and, only when the loop must be
/// told, write its eventfd once, after unlocking (so the woken loop does not sleep on the lock):
/// however many posts land between two iterations, the loop is woken once. The loop marks the
/// wake-up consumed only after it has read the eventfd, then takes the posts, so a post that
/// lands after the take finds no wake-up pending and writes again: no post is ever slept on.
///
/// The wake-up's states and every transition (any thread, unless "loop"):
///
/// | from | event | to | effect |
/// |---|---|---|---|
/// | `idle` | a post from another thread; a change the loop re-reads (`wake`) | `written` | eventfd write |
/// | `idle` | `wakeUp()` (`wake(endsNextSleep: true)`) | `writtenForWakeUp` | eventfd write |
/// | `idle` | loop: `beginSpin()`, nothing posted | `spinning` | |
/// | `spinning` | any wake-up | `spinning` | `kick` stored, no write |
/// | `spinning` | loop: `endSpin()` | `idle` | |
/// | `written` | `wakeUp()` | `writtenForWakeUp` | (already written) |
/// | `written`, `writtenForWakeUp` | loop: `takePosts(consumedWakeUp: true)` (the backend read the eventfd) | `idle` | |
/// | `written` | loop: `prepareToSleep()` | `idle`, or `writtenForWakeUp` if a `wakeUp()` came while it read the eventfd | eventfd read, and written again in the second case |
/// | any | loop: `close()` | `closed` | posts refused from then on |
///
/// `prepareToSleep` exists because the loop takes posts without polling the kernel: the write
/// announcing posts it has already taken would otherwise end its next sleep at once. A
/// `wakeUp()`'s write is left for the sleep, which it must end (as `CFRunLoopWakeUp` ends the next
/// sleep of a loop that is awake).
final class Inbox: @unchecked Sendable {
    enum Wake: UInt8 {
        case idle, spinning, written, writtenForWakeUp, closed

        /// The transition table above, checked in debug builds.
        func mayBecome(_ next: Wake) -> Bool {
            switch (self, next) {
            case (_, .closed): true
            case (.closed, _): false
            case (.idle, .written), (.idle, .writtenForWakeUp), (.idle, .spinning): true
            case (.spinning, .idle): true
            case (.written, .writtenForWakeUp), (.written, .idle), (.writtenForWakeUp, .idle): true
            default: self == next
            }
        }
    }

    /// The eventfd other threads write to end a sleep; registered with the backend by the loop.
    /// Closed when the inbox goes, never earlier: another thread holding the loop may be writing
    /// it, and a closed descriptor number could be reused.
    let descriptor: Int32

    // Guarded by `word`: a lock word beside the state, not a `Locked`. Every posting thread takes
    // it for an append of a few instructions and the loop for a pointer swap; against a pthread
    // mutex this saves two calls per post and a second cache line, and a contended thread never
    // sleeps in the kernel for a lock that is free again nanoseconds later
    // (docs/performance-notes.md#choices-in-the-code-before-and-after).
    private let word = LockWord()
    private let blocks = BlockBuffer()
    @exclusivity(unchecked) private var wake = Wake.idle
    /// Loop thread only: the empty buffer swapped in when posts are taken (always empty between
    /// takes, so a pass with nothing posted touches no reference count).
    private let spare = BlockBuffer()
    /// Stored by a wake-up that finds the loop spinning.
    private let kick = Atomic<Bool>(false)
    /// True while the loop's thread sleeps in the kernel.
    private let asleep = Atomic<Bool>(false)
    /// Whether `blocks` holds posts: set by the post that finds it empty and cleared by the swap
    /// that empties it, both under the lock; read without it by the loop (`mayHavePosts`).
    private let holdsPosts = Atomic<Bool>(false)

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        Platform.closeDescriptor(descriptor)
    }

    @inline(__always)
    private func locked<R>(_ body: () -> R) -> R {
        word.withLock(body)
    }

    /// Under the lock: moves to `next`, checking the transition in debug builds.
    @inline(__always)
    private func become(_ next: Wake) {
        assert(wake.mayBecome(next), "RunLoopKit: inbox wake-up moved from \(wake) to \(next)")
        wake = next
    }

    // MARK: Any thread

    /// Appends `block`, to run in `modes` (nil: the common modes); returns false, dropping it,
    /// once the inbox is closed. Wakes the loop if nothing is pending yet and `fromOtherThread()`
    /// (asked only then: while posts stream in, a wake-up is pending and the thread-specific
    /// look-up is skipped).
    @inline(__always)
    func post(_ block: consuming LoopBlock, modes: [Loop.Mode]?, fromOtherThread: () -> Bool) -> Bool {
        // Moved in, not copied: a copy would retain and release the closure's context, a cache
        // line the loop thread is releasing at the same time.
        var moving: LoopBlock? = consume block
        var mustWrite = false
        let accepted = locked {
            guard wake != .closed else { return false }
            if blocks.isEmpty { holdsPosts.store(true, ordering: .relaxed) }
            blocks.append(moving.take()!, modes: modes)
            if wake == .idle || wake == .spinning, fromOtherThread() { mustWrite = claim(endsNextSleep: false) }
            return true
        }
        if mustWrite { write() }
        return accepted
    }

    /// Ends the loop's current sleep (or spin); `endsNextSleep` (a public `wakeUp()`): also the
    /// next one, if the loop is awake now. Coalesced: one write until the loop has read it.
    func wake(endsNextSleep: Bool) {
        if locked({ claim(endsNextSleep: endsNextSleep) }) { write() }
    }

    /// Under the lock: whether this caller is the one to write the eventfd.
    private func claim(endsNextSleep: Bool) -> Bool {
        switch wake {
        case .idle:
            become(endsNextSleep ? .writtenForWakeUp : .written)
            return true
        case .spinning:
            kick.store(true, ordering: .releasing)
            return false
        case .written:
            if endsNextSleep { become(.writtenForWakeUp) }
            return false
        case .writtenForWakeUp, .closed:
            return false
        }
    }

    private func write() {
        Platform.signalEventDescriptor(descriptor)
    }

    /// Whether the loop's thread is asleep in the kernel (the answer may be stale).
    var isAsleep: Bool { asleep.load(ordering: .acquiring) }

    /// Whether posts may be waiting, read without the lock. Loop thread: a false answer can only
    /// be stale for a post that is landing now, which the next take sees (the take before every
    /// sleep takes the lock whatever this says, so no post is slept on); a post that happened
    /// before the read (ordered by a lock, a semaphore, program order) is always seen.
    var mayHavePosts: Bool { holdsPosts.load(ordering: .relaxed) }

    /// Whether the loop is spinning before a sleep (for tests and diagnostics).
    var isSpinning: Bool { locked { wake == .spinning } }

    var isClosed: Bool { locked { wake == .closed } }

    // MARK: Loop thread

    /// Appends the posts to `pending`. `consumedWakeUp`: the backend has read the eventfd, so the
    /// next post must write it again.
    func takePosts(into pending: BlockBuffer, consumedWakeUp: Bool) {
        let took = locked {
            if consumedWakeUp, wake == .written || wake == .writtenForWakeUp { become(.idle) }
            return swapPosts()
        }
        if took { queueTaken(into: pending) }
    }

    /// Before sleeping: takes the posts, first reading the eventfd if it was written only to
    /// announce posts (see the type's notes). Read before the take, never after: a post landing in
    /// between either finds the wake-up still pending (and is taken here) or writes again.
    func prepareToSleep(into pending: BlockBuffer) {
        // One lock in the usual case (no wake-up pending): look at the state and take the posts.
        var took = false
        let postsOnly = locked {
            if wake != .written { took = swapPosts() }
            return wake == .written
        }
        if took { queueTaken(into: pending) }
        guard postsOnly else { return }
        _ = Platform.drainEventDescriptor(descriptor)
        var rewrite = false
        took = locked {
            // A wakeUp() that came while the eventfd was read found it written and did not write:
            // the loop writes for it, so that its next sleep still ends at once.
            if wake == .writtenForWakeUp {
                rewrite = true
            } else if wake == .written {
                become(.idle)
            }
            return swapPosts()
        }
        if took { queueTaken(into: pending) }
        if rewrite { write() }
    }

    /// Under the lock: swaps the posts with the empty spare; false if nothing was posted.
    private func swapPosts() -> Bool {
        guard !blocks.isEmpty else { return false }
        blocks.exchange(with: spare)
        holdsPosts.store(false, ordering: .relaxed)
        return true
    }

    /// Appends the posts just swapped into `spare` to `pending`, leaving an empty spare again.
    private func queueTaken(into pending: BlockBuffer) {
        if pending.isEmpty {
            pending.exchange(with: spare)
        } else {
            pending.append(movingFrom: spare)
        }
        // A burst grew it beyond what the loop keeps: its memory goes back.
        if spare.capacity > BlockBuffer.retainedCapacity { spare.releaseStorage() }
    }

    /// Marks the loop spinning, if nothing is posted and no wake-up is pending (a pending one has
    /// its eventfd write, which the sleep takes). Returns whether it did.
    func beginSpin() -> Bool {
        kick.store(false, ordering: .relaxed)
        return locked {
            guard wake == .idle, blocks.isEmpty else { return false }
            become(.spinning)
            return true
        }
    }

    /// Whether a wake-up came during the spin. Acquiring, to pair with the releasing store in
    /// `claim`; the read after `endSpin()` sees every kick, since each is stored under the lock.
    var wasKicked: Bool { kick.load(ordering: .acquiring) }

    /// Ends a spin: later wake-ups write the eventfd as usual.
    func endSpin() {
        locked { if wake == .spinning { become(.idle) } }
    }

    /// Runs `body` (the loop's sleep in the kernel) with `isAsleep` true.
    func sleeping<R>(_ body: () -> R) -> R {
        asleep.store(true, ordering: .releasing)
        defer { asleep.store(false, ordering: .releasing) }
        return body()
    }

    /// Refuses posts from now on. The posts already queued stay for the loop's last pass.
    func close() {
        locked { become(.closed) }
    }

    /// After `close()`: the posts never taken, for the teardown to release (or run, for jobs).
    func takeOrphans() -> BlockBuffer {
        let orphans = BlockBuffer()
        locked {
            orphans.exchange(with: blocks)
            holdsPosts.store(false, ordering: .relaxed)
        }
        return orphans
    }
}
