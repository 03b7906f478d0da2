import Synchronization

/// Delivers a POSIX signal (`SIGINT`, `SIGTERM`, `SIGHUP`, …) on a loop's thread.
///
/// From creation until `invalidate()`, the signal is caught process-wide: a `sigaction` handler
/// that only writes to an eventfd (async-signal-safe) wherever the kernel delivers the signal — on
/// any thread, including ones that know nothing of RunLoopKit — and the loop reads that eventfd
/// like any descriptor. Several sources, on one loop or several, may watch the same signal; each
/// gets it. Signals that arrive close together may be coalesced into one callout, as the kernel
/// coalesces them. When the last source of a signal is invalidated, the previous action is
/// restored. A source belongs to one loop; its handler runs on that loop's thread, in the modes
/// that hold it, and counts as a handled source. This does not use libevent's `evsignal`.
///
/// The loop keeps a source it holds: `loop.add(LoopSignalSource(signal: SIGTERM) { ... }, forMode:
/// .default)` goes on catching the signal with no other reference to the source, until the source
/// is removed from every mode or invalidated, or the loop ends. A source in no loop is invalidated
/// when its last reference goes.
public final class LoopSignalSource: @unchecked Sendable {
    /// The signal delivered.
    ///
    /// Any thread.
    public let signal: Int32
    let descriptorSource: LoopDescriptorSource
    private let route: Route

    /// The signal's routing to this source's eventfd, released once: by `invalidate()`, or just
    /// before the eventfd is closed (the loop ended, or the source went with its last reference).
    private final class Route: Sendable {
        let signal: Int32
        let slot: Int32
        private let released = Atomic<Bool>(false)

        init(signal: Int32, slot: Int32) {
            self.signal = signal
            self.slot = slot
        }

        func release() {
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            Platform.releaseSignal(signal, slot: slot)
        }
    }

    /// Starts catching `signal` and delivering it to `handler` once the source is added to a loop.
    ///
    /// Any thread; the signal is also unblocked in the calling thread (a process started from a
    /// thread that blocks it inherits it blocked, and a blocked signal never reaches the handler).
    /// `SIGKILL`, `SIGSTOP` and numbers outside 1…64 are programmer errors; so are more than 16
    /// live sources for one signal.
    public init(signal: Int32, _ handler: sending @escaping (Int32) -> Void) {
        self.signal = signal
        let (descriptor, slot) = Platform.catchSignal(signal)
        let route = Route(signal: signal, slot: slot)
        self.route = route
        descriptorSource = LoopDescriptorSource(
            unchecked: descriptor, events: .readable, closesDescriptor: true, beforeClosing: route.release
        ) { source, _ in
            // Drain the eventfd first: a signal arriving during the handler calls it again.
            guard Platform.drainEventDescriptor(source.fileDescriptor) else { return }
            handler(signal)
        }
        descriptorSource.keepAlive(self)
    }

    deinit {
        invalidate()
    }

    /// Whether the source is still catching its signal.
    ///
    /// Any thread.
    public var isValid: Bool { descriptorSource.isValid }

    /// Stops catching the signal through this source (restoring the previous action if it was the
    /// last one), removes it from its loop and releases its handler.
    ///
    /// Any thread, including from inside its own handler.
    public func invalidate() {
        // Unroute first, so no handler writes to the eventfd once the loop closes it.
        route.release()
        descriptorSource.invalidate()
    }
}

extension Loop {
    /// Adds a signal source to `mode` (`.common`: every common mode, now and later).
    ///
    /// Any thread. A source belongs to one loop: adding it to a second loop is a programmer error.
    public func add(_ source: LoopSignalSource, forMode mode: Mode) {
        add(source.descriptorSource, forMode: mode)
    }

    /// Removes a signal source from `mode`; signals that arrive meanwhile wait (coalesced).
    ///
    /// Any thread.
    public func remove(_ source: LoopSignalSource, forMode mode: Mode) {
        remove(source.descriptorSource, forMode: mode)
    }

    /// Whether a signal source is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ source: LoopSignalSource, inMode mode: Mode) -> Bool {
        contains(source.descriptorSource, inMode: mode)
    }
}
