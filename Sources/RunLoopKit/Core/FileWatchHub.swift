// A loop's file watches: one inotify descriptor for all of them, read by one descriptor source of
// the loop (`reader`), its events sorted to the watches by watch descriptor.
//
// The reader is in exactly the modes that hold a watched watch, so that the loop reads the
// descriptor whenever a mode with a watch runs, and a mode without one stays empty (a run of it
// finishes). The changes go to each watch's inbox; a watch in the running mode gets them at once,
// from the reader's callout, and the others when one of their modes runs, through their source.
//
// Lock order: the hub's `table` lock, then the loop's `state` lock, then an item's or an inbox's
// lock. No handler runs, and nothing a handler captured is released, with the hub's lock held.

import Glibc

/// The inotify instance of one loop and the watches it serves.
final class FileWatchHub: @unchecked Sendable {  // `buffer`: loop thread only; the rest locked
    let descriptor: Int32
    let reader: LoopDescriptorSource
    private weak var loop: Loop?
    private let table = Locked(Table())
    /// Where the reader reads the descriptor into. Loop thread only.
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)

    private struct Table {
        /// The watches by kernel watch descriptor: several when they watch the same item.
        var watches: [Int32: [LoopFileWatch]] = [:]
        /// The loop ended: the descriptor is closed, nothing is watched any more.
        var closed = false
    }

    init(for loop: Loop) throws(LoopError) {
        descriptor = try Platform.openInotify()
        reader = LoopDescriptorSource(client: descriptor, events: .readable)
        self.loop = loop
        reader.hold(self)
    }

    deinit {
        buffer.deallocate()
    }

    // MARK: Adding and removing watches (any thread)

    func add(_ watch: LoopFileWatch, forMode mode: Loop.Mode) {
        guard let loop else { return }
        let failure: LoopError? = table.withLock { table in
            guard !table.closed else { return nil }
            loop.add(watch.source, forMode: mode)
            guard loop.contains(watch.source, inMode: mode), watch.inbox.mayRegister else { return nil }
            switch Platform.addInotifyWatch(descriptor, path: watch.path, mask: Platform.fileWatchMask) {
            case .success(let number):
                table.watches[number, default: []].append(watch)
                watch.inbox.register(number)
                reconcileReader(table, loop)
                return nil
            case .failure(let failure):
                return LoopError.systemCall("inotify_add_watch(\(watch.path))", failedWith: failure)
            }
        }
        if let failure { watch.fail(failure) }
    }

    func remove(_ watch: LoopFileWatch, forMode mode: Loop.Mode) {
        guard let loop else { return }
        table.withLock { table in
            loop.remove(watch.source, forMode: mode)
            let inAMode = loop.state.withLock { _ in !watch.source.membership.isEmpty }
            if !inAMode { unregister(watch, &table, loop) }
        }
    }

    /// The watch was invalidated: the kernel's watch goes if no other watch shares it.
    func unregister(_ watch: LoopFileWatch) {
        guard let loop else { return }
        table.withLock { unregister(watch, &$0, loop) }
    }

    private func unregister(_ watch: LoopFileWatch, _ table: inout Table, _ loop: Loop) {
        guard let number = watch.inbox.unregister(), var sharing = table.watches[number] else { return }
        sharing.removeAll { $0 === watch }
        if sharing.isEmpty {
            table.watches[number] = nil
            Platform.removeInotifyWatch(descriptor, number)
        } else {
            table.watches[number] = sharing
        }
        reconcileReader(table, loop)
    }

    /// Puts the reader in exactly the modes (and the common set) that hold a watched watch.
    private func reconcileReader(_ table: Table, _ loop: Loop) {
        let sources = table.watches.values.joined().map(\.source)
        let wantsCommon = loop.state.withLock { _ in sources.contains { $0.membership.isCommon } }
        if wantsCommon != loop.contains(reader, inMode: .common) {
            if wantsCommon { loop.add(reader, forMode: .common) } else { loop.remove(reader, forMode: .common) }
        }
        let changes: [(mode: Loop.Mode, add: Bool)] = loop.state.withLock { state in
            var wanted = Set<ModeSlot>()
            for source in sources { wanted.formUnion(source.membership.modes) }
            let held = Set(reader.membership.modes)
            return wanted.symmetricDifference(held).map { (state.modes[Int($0)].mode, wanted.contains($0)) }
        }
        for change in changes {
            if change.add { loop.add(reader, forMode: change.mode) } else { loop.remove(reader, forMode: change.mode) }
        }
    }

    // MARK: The end

    /// The loop is ending (its teardown, on its thread): the descriptor is closed, with every
    /// kernel watch of it. The watches themselves are invalidated by the teardown.
    func close() {
        let watches = table.withLock { table in
            table.closed = true
            defer { table.watches = [:] }
            return table.watches
        }
        reader.invalidate()
        // The backend closed it if it had taken it; a loop that never ran has no backend.
        reader.closeOwnedDescriptor()
        withExtendedLifetime(watches) {}
    }
}

extension FileWatchHub: DescriptorClient {
    /// Loop thread: reads what the descriptor has, sorts it to the watches, and delivers to those
    /// in the running mode. At most 16 buffers per callout: the rest waits for the next pass
    /// (level-triggered), so that a flood of events does not starve the loop's other sources.
    func descriptorReady(_ events: LoopDescriptorSource.Events) {
        var batches = Batches()
        for _ in 0..<16 {
            guard case .success(let count) = Platform.read(descriptor, into: buffer), count > 0 else { break }
            let events = Platform.inotifyEvents(in: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            table.withLock { table in
                for event in events { sort(event, &table, into: &batches) }
                // Under the lock still, so that a watch unregistered meanwhile gets none of them.
                batches.post()
                if table.watches.isEmpty || events.contains(where: { Self.isGone($0.mask) }), let loop {
                    reconcileReader(table, loop)
                }
            }
        }
        deliver(batches.watches)
    }

    func descriptorSourceInvalidated() {
        let watches = table.withLock { table in
            table.closed = true
            defer { table.watches = [:] }
            return table.watches
        }
        withExtendedLifetime(watches) {}
    }

    /// The watched item itself went: deleted, moved away, unmounted, or its watch dropped.
    private static func isGone(_ mask: UInt32) -> Bool {
        mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT) != 0
    }

    /// Adds `event`'s change to the batches of the watches it is for.
    private func sort(_ event: Platform.InotifyEvent, _ table: inout Table, into batches: inout Batches) {
        if event.mask & UInt32(IN_Q_OVERFLOW) != 0 {
            for watch in table.watches.values.joined() {
                batches.add(LoopFileWatch.Change(name: nil, kind: .overflow), for: watch)
            }
            return
        }
        guard let watches = table.watches[event.watch] else { return }
        if Self.isGone(event.mask) {
            table.watches[event.watch] = nil
            // A moved item is still watched by the kernel: let go of it (its IN_IGNORED finds no one).
            if event.mask & UInt32(IN_IGNORED) == 0 { Platform.removeInotifyWatch(descriptor, event.watch) }
            for watch in watches { batches.add(LoopFileWatch.Change(name: nil, kind: .watchedItemGone), for: watch) }
            return
        }
        guard let kind = Self.kind(of: event.mask) else { return }
        for watch in watches { batches.add(LoopFileWatch.Change(name: event.name, kind: kind), for: watch) }
    }

    private static func kind(of mask: UInt32) -> LoopFileWatch.Kind? {
        if mask & UInt32(IN_MODIFY) != 0 { return .modified }
        if mask & UInt32(IN_ATTRIB) != 0 { return .attributesChanged }
        if mask & UInt32(IN_CREATE) != 0 { return .created }
        if mask & UInt32(IN_DELETE) != 0 { return .deleted }
        if mask & UInt32(IN_MOVED_FROM) != 0 { return .movedFrom }
        if mask & UInt32(IN_MOVED_TO) != 0 { return .movedTo }
        return nil
    }

    /// The changes of one read, by watch, in the order the watches first had one; and every watch
    /// that had one in this callout.
    private struct Batches {
        private var pending: [(watch: LoopFileWatch, changes: [LoopFileWatch.Change])] = []
        private var index: [ObjectIdentifier: Int] = [:]
        private var seen = Set<ObjectIdentifier>()
        private(set) var watches: [LoopFileWatch] = []

        mutating func add(_ change: LoopFileWatch.Change, for watch: LoopFileWatch) {
            let key = ObjectIdentifier(watch)
            if let at = index[key] {
                pending[at].changes.append(change)
                return
            }
            index[key] = pending.count
            pending.append((watch, [change]))
            if seen.insert(key).inserted { watches.append(watch) }
        }

        /// Queues each watch's changes in its inbox, under one lock per watch.
        mutating func post() {
            for (watch, changes) in pending { watch.inbox.append(contentsOf: changes) }
            pending.removeAll(keepingCapacity: true)
            index.removeAll(keepingCapacity: true)
        }
    }

    /// Delivers at once to the watches in the running mode (their handlers run in this callout);
    /// the others' sources are signalled, to deliver when one of their modes runs.
    private func deliver(_ watches: [LoopFileWatch]) {
        guard !watches.isEmpty, let loop else { return }
        let running = loop.currentMode
        for watch in watches {
            watch.source.signal()
            if let running, loop.contains(watch.source, inMode: running), let perform = watch.source.takeSignal() {
                perform()
            }
        }
    }
}

extension Loop {
    /// This loop's file-watch hub, made (with its inotify descriptor) at the first watch added.
    /// Throws when no inotify instance can be opened.
    func fileWatchHubCreating() throws(LoopError) -> FileWatchHub {
        let outcome = fileWatches.withLock { hub -> Result<FileWatchHub, LoopError> in
            if let hub { return .success(hub) }
            do throws(LoopError) {
                let made = try FileWatchHub(for: self)
                hub = made
                return .success(made)
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// This loop's file-watch hub, if it has one.
    var fileWatchHub: FileWatchHub? { fileWatches.withLock { $0 } }

    /// At the loop's teardown: closes the inotify descriptor of its file watches.
    func closeFileWatches() {
        fileWatches.withLock { $0 }?.close()
    }
}
