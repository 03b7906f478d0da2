import Synchronization

/// Readiness of a file descriptor or socket, served on the loop's thread in the modes that hold the
/// source, straight from libevent (epoll) with no helper thread.
///
/// Level-triggered: while the descriptor stays readable (or writable, if asked for) the handler is
/// called on every iteration, so read until `EAGAIN` or accept that the next iteration calls again.
/// Enable `.writable` only while output is queued. A descriptor that becomes ready while none of its
/// modes runs is neither lost nor spun on: it is taken off epoll until a mode holding it runs again.
/// Readiness counts as a handled source. A source belongs to one loop.
///
/// Invalidate the source before closing its descriptor. The source never closes the descriptor.
public final class LoopDescriptorSource: @unchecked Sendable {
    /// What to wait for, and what was ready.
    public struct Events: OptionSet, Sendable, Hashable {
        /// The events as bits: `readable` 1, `writable` 2.
        public let rawValue: UInt8
        /// The events whose bits are set in `rawValue`.
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Data (or a connection, or end of file) can be read without blocking.
        public static let readable = Events(rawValue: 1 << 0)
        /// Data can be written without blocking.
        public static let writable = Events(rawValue: 1 << 1)
    }

    struct State: ItemState, @unchecked Sendable {  // the handler only ever runs on the loop thread
        /// The handler, or the library object served instead of one (a listener, a connection),
        /// held only while it is in its loop (`hold`, `letGo`): it is told of readiness and
        /// invalidation. One field for both: a source has one or the other.
        var callee: Callee?
        var isValid = true
        var events: Events
        var ownedDescriptorClosed = false
        /// Why the backend stopped watching, boxed: one word where the error takes three, and
        /// few sources ever fail (a server holds one source per connection).
        var failure: Failure?
        var link: LoopLink?
    }

    /// The source's state behind a lock word in the object itself rather than a `Locked` (a
    /// pthread mutex in an allocation of its own; see `ItemCore`): the critical sections are a few
    /// field accesses, taken on every event the source serves, and a server has one source per
    /// connection, mostly idle (docs/performance-notes.md#memory-per-connection).
    @exclusivity(unchecked) var core: ItemCore<State>
    // The stored layout is in declaration order: the flag and the descriptor fill the end of
    // `core`'s last word, and the registration needs no padding after it but two bytes before the
    // positions, last, which only adding and removing the source reads (a server holds one source
    // per connection).

    /// For sources the library creates over its own descriptors: closed once libevent has let go.
    let closesDescriptor: Bool
    /// The descriptor watched.
    ///
    /// Any thread.
    public let fileDescriptor: Int32
    /// Beside `core`, not in it (see `ItemCore`); guarded by its loop's `state` lock.
    @exclusivity(unchecked) var membership = Membership()
    /// Called once, just before a library-owned descriptor is closed (a signal source unroutes
    /// its signal, so that no handler writes to a closed or reused descriptor number). In a box:
    /// one word, where the closure takes two, and only signal sources have one.
    private let beforeClosing: BeforeClosing?
    /// Its event in its loop's backend (`LibeventBackend`), in the source rather than in a table
    /// of the backend's: loop thread only.
    @exclusivity(unchecked) var registration = LibeventRegistration()
    /// Its index in each mode's descriptor sources (`ModeSlots`); guarded by its loop's `state` lock.
    @exclusivity(unchecked) var positions = ModePositions<UInt32>()

    /// See `beforeClosing`.
    private final class BeforeClosing: Sendable {
        let action: @Sendable () -> Void
        init(_ action: @escaping @Sendable () -> Void) { self.action = action }
    }

    /// Watches `fileDescriptor` for `events`.
    ///
    /// Any thread. Checked here, when the source is made, not when it is added: throws a
    /// `LoopError` naming the descriptor, with `systemError` set, if it is not open (`EBADF`) or
    /// if epoll cannot watch it (`EPERM`): a regular file or a directory (always ready), or a
    /// character device epoll refuses, such as `/dev/null` (standard input under nohup, cron or
    /// systemd), which a scratch epoll instance is asked to take. The source does nothing until
    /// added to a loop.
    public convenience init(
        fileDescriptor: Int32, events: Events,
        _ handler: sending @escaping (LoopDescriptorSource, Events) -> Void
    ) throws(LoopError) {
        try Platform.validateWatchable(fileDescriptor)
        self.init(unchecked: fileDescriptor, events: events, closesDescriptor: false, handler)
    }

    init(
        unchecked fileDescriptor: Int32, events: Events, closesDescriptor: Bool,
        beforeClosing: (@Sendable () -> Void)? = nil,
        _ handler: ((LoopDescriptorSource, Events) -> Void)?
    ) {
        self.fileDescriptor = fileDescriptor
        self.closesDescriptor = closesDescriptor
        self.beforeClosing = beforeClosing.map(BeforeClosing.init)
        self.core = ItemCore(State(callee: handler.map { .handler($0) }, events: events))
    }

    /// A source serving a library object (`DescriptorClient`) rather than a handler.
    convenience init(client fileDescriptor: Int32, events: Events) {
        self.init(unchecked: fileDescriptor, events: events, closesDescriptor: true, nil)
    }

    /// What the source waits for. Setting it takes effect before the loop next waits.
    ///
    /// Any thread. An empty set keeps the source in its modes without watching anything.
    public var events: Events {
        get { withState { $0.events } }
        set {
            let loop: Loop? = withState { state in
                guard state.isValid, state.events != newValue else { return nil }
                state.events = newValue
                return state.link?.loop
            }
            loop?.descriptorDidChange(self)
        }
    }

    /// Whether the source is still in service.
    ///
    /// Any thread.
    public var isValid: Bool { withState { $0.isValid } }

    /// Why the loop stopped watching the descriptor, if it had to: for example it was closed while
    /// still registered. The source is then invalid.
    ///
    /// Any thread.
    public var error: LoopError? { withState { $0.failure?.error } }

    /// Stops watching for good, removes the source from its loop and releases its handler.
    ///
    /// Any thread, including from inside its own handler. On the loop's thread the descriptor is
    /// off epoll when this returns, so it may be closed right after.
    public func invalidate() {
        // What the state held goes after the lock: a handler's captures may call back in as they go.
        let (wasValid, loop, callee) = withState { state in
            guard state.isValid else { return (false, nil as Loop?, nil as Callee?) }
            state.isValid = false
            defer { state.callee = nil }
            return (true, state.link?.loop, state.callee)
        }
        guard wasValid else { return }
        if let loop {
            loop.removeItemEverywhere(self)
            loop.descriptorDidChange(self)
        } else {
            closeOwnedDescriptor()
        }
        if case .client(let client) = callee { client.descriptorSourceInvalidated() }
    }

    deinit {
        // A library-owned descriptor the backend never took would otherwise leak.
        closeOwnedDescriptor()
    }

    /// Closes a library-owned descriptor, once, after libevent has let go of it.
    func closeOwnedDescriptor() {
        guard closesDescriptor else { return }
        let first = withState { state in
            defer { state.ownedDescriptorClosed = true }
            return !state.ownedDescriptorClosed
        }
        guard first else { return }
        beforeClosing?.action()
        Platform.closeDescriptor(fileDescriptor)
    }

    // MARK: Loop machinery

    func bind(to loop: Loop) -> Bool {
        bindState(to: loop, kind: "LoopDescriptorSource") { $0.isValid }
    }

    /// Holds `client` (which holds this source): the loop keeps it alive through the source while
    /// it is in a mode. Nothing if the source is invalid. Returns whether it is held.
    @discardableResult
    func hold(_ client: any DescriptorClient) -> Bool {
        withState { state in
            guard state.isValid else { return false }
            state.callee = .client(client)
            return true
        }
    }

    /// The client, while it is held.
    var heldClient: (any DescriptorClient)? { withState { $0.client } }

    /// Stops holding the client; returns it, for the caller to release outside every lock.
    func letGo() -> (any DescriptorClient)? {
        withState { state in
            defer { if state.client != nil { state.callee = nil } }
            return state.client
        }
    }

    /// What the backend should watch: nil once invalid.
    var interest: Events? {
        withState { $0.isValid ? $0.events : nil }
    }

    /// A failure's error, in a box of its own (see `State.failure`).
    final class Failure: Sendable {
        let error: LoopError
        init(error: LoopError) { self.error = error }
    }

    /// Who is called when the descriptor is ready.
    enum Callee {
        case handler((LoopDescriptorSource, Events) -> Void)
        case client(any DescriptorClient)
    }

    /// Who to call and the events asked for, if valid.
    var callout: (callee: Callee, events: Events)? {
        withState { state in
            guard state.isValid, let callee = state.callee else { return nil }
            return (callee, state.events)
        }
    }

    /// The backend could not watch the descriptor: the source becomes invalid with `error`.
    func fail(_ error: LoopError) {
        withState { state in
            guard state.isValid else { return }
            state.failure = Failure(error: error)
        }
        invalidate()
    }
}

/// A library object served through a descriptor source of its own (a listener, a connection).
/// The source calls it directly, with no closure and no weak reference in between, and holds it
/// only while it is in its loop, so that an object nothing else references still goes.
protocol DescriptorClient: AnyObject {
    /// Loop thread: the descriptor is ready for `events`.
    func descriptorReady(_ events: LoopDescriptorSource.Events)
    /// The source was invalidated while it held the client (by the client itself, a failure,
    /// or the loop's teardown). Any thread, outside the source's lock.
    func descriptorSourceInvalidated()
}

extension Loop {
    /// Adds a descriptor source to `mode` (`.common`: every common mode, now and later).
    ///
    /// Any thread. The loop keeps the source until it is removed from every mode or invalidated.
    /// Adding it again to a mode it is in, adding an invalidated source, or adding to a loop that
    /// has ended does nothing. A source belongs to one loop: adding it to a second loop is a
    /// programmer error.
    public func add(_ source: LoopDescriptorSource, forMode mode: Mode) {
        guard source.bind(to: self), insertItem(source, forMode: mode) else { return }
        descriptorDidChange(source)
    }

    /// Removes a descriptor source from `mode` without invalidating it.
    ///
    /// Any thread. Removing a source that is not there does nothing.
    public func remove(_ source: LoopDescriptorSource, forMode mode: Mode) {
        removeItem(source, forMode: mode)
        descriptorDidChange(source)
    }

    /// Whether a descriptor source is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ source: LoopDescriptorSource, inMode mode: Mode) -> Bool {
        containsItem(source, inMode: mode)
    }
}

extension LoopDescriptorSource.State {
    /// The library object served, while it is held.
    var client: (any DescriptorClient)? {
        if case .client(let client) = callee { return client }
        return nil
    }
}
