// Descriptor sources on the loop's thread: bringing the backend in line with the tables, and
// serving the descriptors that were ready (step 2.5).

extension Loop {
    /// Queues `source` for the loop thread to bring libevent in line with it; on the loop thread
    /// that happens at once, so that a descriptor is off epoll before its owner closes it.
    func descriptorDidChange(_ source: LoopDescriptorSource) {
        state.withLock { state in
            state.descriptorChanges.append(source)
            state.version.bump()
        }
        if isCurrentThread {
            if let backend { applyDescriptorChanges(backend) }
        } else {
            wakeUpIfForeign()
        }
    }

    /// Loop thread only: registers the descriptors of `mode` if another mode's set is registered,
    /// then applies queued changes. A descriptor of another mode that stays registered is removed
    /// when it fires (see `serveDescriptors`).
    func syncDescriptors(for mode: Mode, _ backend: LibeventBackend) {
        if backend.registeredMode != mode {
            let sources = state.withLock { state in
                state.withExistingItems(of: mode) { items -> [LoopDescriptorSource] in
                    items.descriptors.squeezeIfSparse(items.slot)
                    return Array(items.descriptors)
                } ?? []
            }
            backend.registeredMode = mode
            for source in sources {
                backend.watch(source, source.interest)
            }
        }
        applyDescriptorChanges(backend)
    }

    func applyDescriptorChanges(_ backend: LibeventBackend) {
        // Queuing a change bumps the tables' version: unchanged since the queue was emptied, no lock.
        guard tablesVersion.current != onThread.descriptorChangesSeen else { return }
        let mode = backend.registeredMode
        let changes: [(source: LoopDescriptorSource, inRegisteredMode: Bool, inAMode: Bool)] = state.withLock {
            state in
            onThread.descriptorChangesSeen = state.version.current
            guard !state.descriptorChanges.isEmpty else { return [] }
            defer { state.descriptorChanges.removeAll(keepingCapacity: true) }
            let slot = mode.flatMap { state.slot(of: $0) }
            return state.descriptorChanges.map { source in
                (source, slot.map { source.membership.modes.contains($0) } ?? false, !source.membership.isEmpty)
            }
        }
        for change in changes {
            // nil (invalid) drops the registration and closes a library-owned descriptor; [] only
            // takes it off epoll. A source in no mode at all is forgotten, so that the backend
            // does not keep it (and its handler) alive once its user lets go of it.
            let interest = change.source.interest
            if interest != nil && !change.inAMode {
                backend.forget(change.source)
            } else {
                backend.watch(change.source, change.inRegisteredMode || interest == nil ? interest : [])
            }
        }
    }

    /// Step 2.5, after timers: calls the handlers of the ready descriptors of `mode`.
    /// Returns whether any was handled.
    func serveDescriptors(_ ready: [ReadyDescriptor], in mode: Mode) -> Bool {
        // One lock for the batch: which of the ready sources are in the running mode, as bits on
        // the stack (no array per pass; a server's pass usually has a handful of ready sources).
        return withUnsafeTemporaryAllocation(of: Bool.self, capacity: ready.count) { inMode in
            state.withLock { state in
                let slot = state.slot(of: mode)
                for (index, entry) in ready.enumerated() {
                    inMode.initializeElement(
                        at: index, to: slot.map { entry.source.membership.modes.contains($0) } ?? false)
                }
            }
            let epoch = removals.load(ordering: .acquiring)
            var handled = false
            for (index, entry) in ready.enumerated() {
                let source = entry.source
                // A handler earlier in the batch (or another thread) may have removed this source
                // from the mode: check again, under the lock, only if anything was removed since.
                guard inMode[index],
                    removals.load(ordering: .acquiring) == epoch
                        || state.withLock({ $0.contains(source, in: mode) })
                else {
                    // Ready while none of its modes runs: off epoll until one does, so no spin.
                    if !inMode[index] { backend?.watch(source, []) }
                    continue
                }
                guard let (callee, wanted) = source.callout else { continue }
                let events = entry.events.intersection(wanted)
                guard !events.isEmpty else { continue }
                switch callee {
                case .handler(let handler): callOut(.descriptor) { handler(source, events) }
                case .client(let client): callOut(.descriptor) { client.descriptorReady(events) }
                }
                handled = true
            }
            return handled
        }
    }
}
