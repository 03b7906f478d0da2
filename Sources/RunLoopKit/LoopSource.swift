import Synchronization

/// A custom input source (CFRunLoop's version 0): `signal()` marks it, and a loop running a mode
/// that holds it calls `perform` on the loop's thread.
///
/// Signalled sources are performed in ascending `order`, then in the order they were signalled;
/// each is unsignalled just before its handler runs, so a signal that arrives during the handler
/// runs it again. Unlike CFRunLoop, `signal()` also wakes the loops holding the source. A source
/// may be added to several loops; a signal is performed by the first loop to get to it.
public final class LoopSource: @unchecked Sendable {
    /// Signalled sources run in ascending order.
    ///
    /// Any thread.
    public let order: Int

    struct State: @unchecked Sendable {  // the handler only ever runs on the loop thread
        var isValid = true
        var isSignalled = false
        var signalSequence: UInt64 = 0
        var perform: (() -> Void)?
        var loops: [WeakLoop] = []
    }

    struct WeakLoop {
        weak var loop: Loop?
    }

    let state: Mutex<State>
    private static let signalClock = Atomic<UInt64>(0)

    /// Creates a source whose `perform` runs when it is signalled.
    ///
    /// Any thread. The source does nothing until added to a loop.
    public init(order: Int = 0, _ perform: @escaping () -> Void) {
        self.order = order
        self.state = Mutex(State(perform: perform))
    }

    /// Marks the source as ready and wakes the loops holding it.
    ///
    /// Any thread. Signalling an already signalled source keeps its place in the queue.
    public func signal() {
        let loops: [WeakLoop] = state.withLock { state in
            guard state.isValid else { return [] }
            if !state.isSignalled {
                state.isSignalled = true
                state.signalSequence = LoopSource.signalClock.add(1, ordering: .relaxed).newValue
            }
            return state.loops
        }
        for entry in loops {
            entry.loop?.sourceWasSignalled()
        }
    }

    /// Whether the source is still in service.
    ///
    /// Any thread.
    public var isValid: Bool { state.withLock { $0.isValid } }

    /// Stops the source for good, removes it from every loop and releases its handler.
    ///
    /// Any thread, including from inside its own handler.
    public func invalidate() {
        let loops: [WeakLoop] = state.withLock { state in
            guard state.isValid else { return [] }
            state.isValid = false
            state.isSignalled = false
            state.perform = nil
            defer { state.loops = [] }
            return state.loops
        }
        for entry in loops {
            entry.loop?.removeEverywhere(ObjectIdentifier(self))
        }
    }

    // MARK: Loop machinery

    /// Whether it is signalled, and since when; nil if not.
    var pendingSignal: UInt64? {
        state.withLock { $0.isValid && $0.isSignalled ? $0.signalSequence : nil }
    }

    func attach(to loop: Loop) -> (valid: Bool, signalled: Bool) {
        state.withLock { state in
            guard state.isValid else { return (false, false) }
            state.loops.removeAll { $0.loop == nil }
            if !state.loops.contains(where: { $0.loop === loop }) {
                state.loops.append(WeakLoop(loop: loop))
            }
            return (true, state.isSignalled)
        }
    }

    func loopDidRemove(_ loop: Loop) {
        state.withLock { state in
            state.loops.removeAll { $0.loop == nil || $0.loop === loop }
        }
    }

    /// Unsignals the source and returns its handler, or nil if another run got to it first.
    func takeSignal() -> (() -> Void)? {
        state.withLock { state in
            guard state.isValid, state.isSignalled else { return nil }
            state.isSignalled = false
            return state.perform
        }
    }
}
