// Handlers isolated to a loop: the CFRunLoop idiom (`var fired = false`, a timer sets it, `run`,
// read it) without locks. Handlers are `sending` closures, so the compiler rejects one that
// captures a variable its caller reads afterwards: it cannot know that the handler will run on
// the caller's own thread. These wrappers say so, and check it at run time instead: made on the
// loop's thread, they take an ordinary closure, and the `Sendable` closure they return traps with
// a plain message if it is ever called on another thread (for instance, its item added to another
// loop) instead of racing.

extension Loop {
    /// Wraps a handler that uses state of the loop's own thread, such as a local variable the
    /// caller reads after a run, into one that any item or connection accepts.
    ///
    /// On the loop's thread only, like the returned handler: both stop the process with a plain
    /// message elsewhere (in debug and release builds), so captured state is only ever touched by
    /// the thread that made it.
    ///
    /// ```swift
    /// let loop = Loop.current
    /// var fired = false
    /// let timer = LoopTimer(after: .milliseconds(1), loop.isolated { _ in fired = true })
    /// loop.add(timer, forMode: .default)
    /// loop.run(mode: .default, for: .seconds(1))
    /// // fired == true
    /// ```
    ///
    /// For state that outlives one function, or that handlers share while the caller is gone,
    /// ``LoopBound`` is the usual home.
    public func isolated(_ handler: @escaping () -> Void) -> @Sendable () -> Void {
        let box = isolatedBox(handler)
        return {
            box.check()
            box.value()
        }
    }

    /// Wraps a one-argument handler (a timer's, a port's, `onExit`'s...) that uses state of the
    /// loop's own thread; see ``isolated(_:)-(()->Void)``.
    ///
    /// On the loop's thread only, like the returned handler.
    public func isolated<A>(_ handler: @escaping (A) -> Void) -> @Sendable (A) -> Void {
        let box = isolatedBox(handler)
        return { a in
            box.check()
            box.value(a)
        }
    }

    /// Wraps a two-argument handler (an observer's, `onEvent`'s...) that uses state of the loop's
    /// own thread; see ``isolated(_:)-(()->Void)``.
    ///
    /// On the loop's thread only, like the returned handler.
    public func isolated<A, B>(_ handler: @escaping (A, B) -> Void) -> @Sendable (A, B) -> Void {
        let box = isolatedBox(handler)
        return { a, b in
            box.check()
            box.value(a, b)
        }
    }

    /// Wraps a three-argument handler (a datagram socket's `onReceive`) that uses state of the
    /// loop's own thread; see ``isolated(_:)-(()->Void)``.
    ///
    /// On the loop's thread only, like the returned handler.
    public func isolated<A, B, C>(_ handler: @escaping (A, B, C) -> Void) -> @Sendable (A, B, C) -> Void {
        let box = isolatedBox(handler)
        return { a, b, c in
            box.check()
            box.value(a, b, c)
        }
    }

    /// Wraps an `onRead` handler that uses state of the loop's own thread; see
    /// ``isolated(_:)-(()->Void)``.
    ///
    /// On the loop's thread only, like the returned handler.
    public func isolated<A, B>(_ handler: @escaping (A, inout B) -> Void) -> @Sendable (A, inout B) -> Void {
        let box = isolatedBox(handler)
        return { a, b in
            box.check()
            box.value(a, &b)
        }
    }

    private func isolatedBox<Handler>(_ handler: Handler) -> IsolatedHandler<Handler> {
        precondition(
            isCurrentThread,
            "RunLoopKit: Loop.isolated(_:) called on another thread than the loop's; make the handler on the loop's thread, or capture only Sendable values (a LoopBound for shared state)"
        )
        return IsolatedHandler(handler, link: link)
    }
}

/// A handler made on its loop's thread, with what it takes to check that it runs there.
private struct IsolatedHandler<Handler>: @unchecked Sendable {
    let value: Handler
    // The link, not the loop: an item must not keep its loop alive through its handler.
    private let link: LoopLink

    init(_ value: Handler, link: LoopLink) {
        self.value = value
        self.link = link
    }

    @inline(__always)
    func check() {
        precondition(
            link.loop?.isCurrentThread == true,
            "RunLoopKit: a handler made with Loop.isolated(_:) was called on another thread than its loop's (was its item added to another loop?)"
        )
    }
}
