// Listeners, connections and datagram sockets in a loop's modes. Each is served through a descriptor source of its
// own, which the loop's tables hold; the item itself is kept alive, while that source is in any
// mode, by the source, which holds it as its client (`LoopDescriptorSource.hold`) until it closes
// or leaves its last mode. So an item the caller dropped goes on working, and is released after.

extension Loop {
    /// Adds a listener to `mode` (`.common`: every common mode, now and later); it accepts on this
    /// loop's thread, and the connections it accepts start in the modes it was added to.
    ///
    /// Any thread. Adding it again to a mode it is in does nothing; an invalidated listener is
    /// ignored. Adding it to a loop that has ended does nothing and leaves it free for another
    /// loop. A listener belongs to one loop: adding it to a second loop is a programmer error.
    public func add(_ listener: LoopListener, forMode mode: Mode) {
        addResident(listener, kind: "LoopListener", forMode: mode)
    }

    /// Removes a listener from `mode` without invalidating it; it stops accepting while it is in
    /// no running mode, and is released if it is in no mode and nothing else references it.
    ///
    /// Any thread.
    public func remove(_ listener: LoopListener, forMode mode: Mode) { removeResident(listener, forMode: mode) }

    /// Whether a listener is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ listener: LoopListener, inMode mode: Mode) -> Bool {
        contains(listener.descriptorSource, inMode: mode)
    }

    /// Adds a connection to `mode` (`.common`: every common mode, now and later): it is served
    /// while the loop runs in any mode holding it.
    ///
    /// Any thread. A connection belongs to the loop it was accepted or connected on: adding it to
    /// another loop is a programmer error. Adding a closed connection, or adding to a loop that
    /// has ended, does nothing.
    public func add(_ connection: LoopConnection, forMode mode: Mode) {
        addResident(connection, kind: "LoopConnection", forMode: mode)
    }

    /// Removes a connection from `mode` without closing it: while no running mode holds it, its
    /// input waits in the kernel and its output stays queued. A connection in no mode that nothing
    /// else references is closed and released.
    ///
    /// Any thread.
    public func remove(_ connection: LoopConnection, forMode mode: Mode) { removeResident(connection, forMode: mode) }

    /// Whether a connection is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ connection: LoopConnection, inMode mode: Mode) -> Bool {
        contains(connection.descriptorSource, inMode: mode)
    }

    /// Adds a datagram socket to `mode` (`.common`: every common mode, now and later): it
    /// receives and sends while the loop runs in any mode holding it. Datagrams queued before it
    /// joined a loop are sent then.
    ///
    /// Any thread. Adding it again to a mode it is in does nothing; an invalidated socket is
    /// ignored. Adding it to a loop that has ended does nothing and leaves it free for another
    /// loop. A socket belongs to one loop: adding it to a second loop is a programmer error.
    public func add(_ socket: LoopDatagramSocket, forMode mode: Mode) {
        addResident(socket, kind: "LoopDatagramSocket", forMode: mode)
        socket.joinedLoop()
    }

    /// Removes a datagram socket from `mode` without invalidating it: while no running mode holds
    /// it, arriving datagrams wait in the kernel and queued ones stay queued. A socket in no mode
    /// that nothing else references is closed and released.
    ///
    /// Any thread.
    public func remove(_ socket: LoopDatagramSocket, forMode mode: Mode) { removeResident(socket, forMode: mode) }

    /// Whether a datagram socket is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ socket: LoopDatagramSocket, inMode mode: Mode) -> Bool {
        contains(socket.descriptorSource, inMode: mode)
    }

    func addResident(_ item: some LoopResident, kind: String, forMode mode: Mode) {
        let source = item.descriptorSource
        let (valid, timer, boundHere) = item.withResidency { residency in
            // An ended loop binds nothing: the item stays free for a loop that runs.
            guard !hasEnded else { return (false, nil as LoopTimer?, false) }
            let boundHere = residency.loop == nil
            bindOwner(&residency.loop, to: self, kind: kind)
            guard source.isValid else { return (false, nil, boundHere) }
            if !residency.modes.contains(mode) { residency.modes.append(mode) }
            return (true, residency.timer, boundHere)
        }
        // Held before it is added, so that the loop never serves it unheld; let go again if the
        // loop has ended and refused it, so that nothing holds it in a loop that will not run.
        guard valid, source.hold(item) else { return }
        guard source.bind(to: self), insertItem(source, forMode: mode) else {
            if state.withLock({ _ in source.membership.isEmpty }) { withExtendedLifetime(source.letGo()) {} }
            // The loop ended since the check: unbound again, as if it had been ended then.
            if boundHere {
                item.withResidency { residency in
                    unbindOwner(&residency.loop, from: self)
                    residency.modes.removeAll()
                }
            }
            return
        }
        descriptorDidChange(source)
        if let timer { add(timer, forMode: mode) }
    }

    func removeResident(_ item: some LoopResident, forMode mode: Mode) {
        let source = item.descriptorSource
        guard item.withResidency({ $0.loop === self }) else { return }
        remove(source, forMode: mode)
        let isHeld = state.withLock { _ in !source.membership.isEmpty }
        let timer = item.withResidency { residency in
            residency.modes.removeAll { $0 == mode }
            return residency.timer
        }
        if let timer { remove(timer, forMode: mode) }
        // Released here, outside every lock: this may be the item's last reference.
        let released = isHeld ? nil : source.letGo()
        withExtendedLifetime(released) {}
    }

    /// Loop thread: gives `item` its timer, in the item's modes.
    func attach(_ timer: LoopTimer, to item: some LoopResident) {
        let modes = item.withResidency { residency in
            residency.timer = timer
            return residency.modes
        }
        for mode in modes { add(timer, forMode: mode) }
    }
}
