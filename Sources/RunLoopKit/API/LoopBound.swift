/// A value confined to one loop's thread, shareable as a `Sendable` handle: what several handlers
/// of one loop use for the state they share (a chat room's members, a proxy's pending bytes).
///
/// Handlers given to RunLoopKit are `sending` closures: the compiler rejects one that captures
/// state the caller, or another handler, still uses. State that several handlers of one loop
/// share goes in a `LoopBound` instead, which any of them may capture: it is `Sendable`, and every
/// access to ``value`` checks, in debug and release builds, that it runs on the loop's thread,
/// stopping the process with a plain message otherwise. So a handler of another loop, or a
/// thread of a work pool, that touches it traps before it can race.
///
/// ```swift
/// let loop = Loop.current
/// let lines = LoopBound([String](), on: loop)
/// let timer = LoopTimer(after: .milliseconds(1)) { _ in lines.value.append("fired") }
/// loop.add(timer, forMode: .default)
/// loop.run(mode: .default, for: .seconds(1))
/// // lines.value == ["fired"]
/// ```
///
/// Created on any thread (the value is handed over, so no one else holds it); ``value`` on the
/// loop's thread only; ``loop`` on any thread.
public final class LoopBound<Value>: @unchecked Sendable {
    // Read and written only on `loop`'s thread (checked on every access), so one thread at a time.
    private var stored: Value

    /// The loop whose thread alone may touch ``value``.
    ///
    /// Any thread.
    public let loop: Loop

    /// Confines `value` to `loop`'s thread.
    ///
    /// Any thread: `value` is handed over (`sending`), so the caller keeps no other access to it.
    public init(_ value: sending Value, on loop: Loop) {
        self.stored = value
        self.loop = loop
    }

    /// The value. Read, written and mutated in place (`bound.value.append(x)` does not copy).
    ///
    /// The loop's thread only (including a loop's thread while it tears down, and the thread
    /// running an ended loop's jobs): elsewhere it stops the process with a plain message, in
    /// debug and release builds.
    public var value: Value {
        _read {
            checkThread()
            yield stored
        }
        _modify {
            checkThread()
            yield &stored
        }
    }

    /// Whether the calling thread may touch ``value`` now.
    ///
    /// Any thread.
    public var isAccessible: Bool { loop.isCurrentThread || loop.isIsolatingCurrentContext() == true }

    @inline(__always)
    private func checkThread() {
        guard loop.isCurrentThread else { return checkSlowly() }
    }

    private func checkSlowly() {
        precondition(
            loop.isIsolatingCurrentContext() == true,
            "RunLoopKit: LoopBound<\(Value.self)>.value touched on another thread than its loop's; only handlers and code running on that loop may use it"
        )
    }
}
