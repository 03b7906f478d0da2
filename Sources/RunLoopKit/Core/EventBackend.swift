/// What the loop needs from the kernel, and all it asks of libevent (`LibeventBackend`): polling
/// and waiting for readiness, one timer, and the descriptors of its modes. Used by the loop's
/// thread only; every member may assume it.
///
/// The loop holds its backend by its concrete type, `LibeventBackend`, the one there is; the
/// protocol stays as the contract a second backend would meet. (A busy pass costs the same
/// instructions either way: the optimizer had already resolved the one conformer.)
protocol EventBackend: AnyObject {
    /// Whether a non-blocking poll could find anything the loop does not already know about (a
    /// descriptor or the main queue is watched).
    var hasPollableEvents: Bool { get }
    /// The mode whose descriptor sources are all registered (others may be, until they fire).
    var registeredMode: Loop.Mode? { get set }
    /// Reports what is ready now, without blocking.
    func pollNow() -> BackendEvents
    /// Blocks until something is ready or `deadline` (ticks; nil: none) passes.
    func wait(until deadline: Ticks?) -> BackendEvents
    /// Watches `source` for `events`; empty stops watching, nil drops the source for good (and
    /// closes a descriptor the library owns).
    func watch(_ source: LoopDescriptorSource, _ events: LoopDescriptorSource.Events?)
    /// Drops `source`'s registration without closing anything: it is in no mode.
    func forget(_ source: LoopDescriptorSource)
    /// Main loop: watches libdispatch's main-queue descriptor.
    func watchMainQueue() throws(LoopError)
}

/// A descriptor source that was ready, and for what. A struct rather than a tuple: an array of
/// tuples is emptied element by element through the runtime's generic tuple code.
struct ReadyDescriptor {
    let source: LoopDescriptorSource
    let events: LoopDescriptorSource.Events
}

/// What one poll or wait of the backend observed.
struct BackendEvents {
    /// The loop's eventfd was read: a wake-up was consumed.
    var woken = false
    /// Number of libevent callbacks that ran.
    var callbacks = 0
    /// libdispatch signalled that the main queue has work (its eventfd was read).
    var mainQueueReady = false
    /// Descriptor sources that were ready, with what was ready.
    var ready: [ReadyDescriptor] = []

    var isEmpty: Bool { callbacks == 0 }
}
