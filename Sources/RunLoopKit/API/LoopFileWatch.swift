/// A file or directory watched for changes (inotify), as a loop item: the changes are delivered
/// on the loop's thread, in the modes that hold the watch, as a batch per wake-up.
///
/// A file's watch reports writes (`modified`) and changes of its permissions, owner or times
/// (`attributesChanged`); a directory's watch also reports its children created, deleted and
/// renamed, each with the child's name. When the watched item itself is deleted or moved away
/// (`rm`, `mv`, a rename over it, its file system unmounted), the last change of the batch is
/// `watchedItemGone`: the watch then ends (`isValid` turns false once that batch is delivered).
/// A file deleted while a process (this one included) holds it open goes only when its last
/// descriptor closes: until then its deletion shows as `attributesChanged` (its link count).
/// Changes that could not be recorded are reported as `overflow` (a `Change` with no name): the
/// kernel's queue of events overflowed (fs.inotify.max_queued_events), or more than 65536 changes
/// waited for a mode of the watch to run. Look at the watched item again then.
///
/// Each loop reads all its watches through one inotify descriptor, opened when its first watch
/// is added, non-blocking and close-on-exec, and served as one descriptor source; two watches of
/// one loop on the same file share the kernel's watch and both get its changes.
///
/// The kernel watches the item while the watch is in at least one mode of its loop: removing it
/// from its last mode stops watching (changes meanwhile are not recorded), adding it again starts
/// afresh. The loop keeps a watch it holds, as any item, until it is removed from every mode or
/// invalidated; a watch in no loop goes with its last reference. A watch belongs to one loop.
public final class LoopFileWatch: Sendable {
    /// One change to the watched item or to a child of a watched directory.
    public struct Change: Sendable, Equatable {
        /// The child of a watched directory the change is about; nil for the watched item itself
        /// (and for `overflow`).
        public var name: String?
        /// What happened.
        public var kind: Kind

        /// A change of `kind` to the child `name` (nil: the watched item itself).
        public init(name: String?, kind: Kind) {
            self.name = name
            self.kind = kind
        }
    }

    /// What happened to a watched item or a child of a watched directory.
    public enum Kind: Sendable, Equatable {
        /// Its content was written (`IN_MODIFY`).
        case modified
        /// Its permissions, owner, link count or times changed (`IN_ATTRIB`).
        case attributesChanged
        /// A child was created in the watched directory, or linked into it (`IN_CREATE`).
        case created
        /// A child was deleted from the watched directory (`IN_DELETE`).
        case deleted
        /// A child was renamed away from this name (`IN_MOVED_FROM`).
        case movedFrom
        /// A child was renamed to this name (`IN_MOVED_TO`).
        case movedTo
        /// The watched item was deleted, moved away or unmounted, or could not be watched when the
        /// watch was added (see `error`): always the last change a watch reports.
        case watchedItemGone
        /// Changes were lost: the kernel's queue overflowed, or too many waited for a mode of the
        /// watch to run. The name is nil; look at the watched item again.
        case overflow
    }

    /// The path watched, as given.
    ///
    /// Any thread.
    public let path: String
    /// The watch as a custom source of its loop: it is what modes hold, and its perform delivers
    /// the changes waiting in `inbox` when one of its modes runs.
    let source: LoopSource
    let inbox: FileWatchInbox

    /// Watches `path`, a file or a directory; `handler` gets its changes once the watch is added to
    /// a loop.
    ///
    /// Any thread. Throws a `LoopError` with `systemError` set if the kernel cannot watch `path`:
    /// `ENOENT` for a path that does not exist, `EACCES` without read permission, `ENOSPC` once
    /// the user's watches (fs.inotify.max_user_watches) ran out. Should the item go before the
    /// watch is added, the handler gets `watchedItemGone` and `error` says why.
    public init(path: String, _ handler: sending @escaping (LoopFileWatch, [Change]) -> Void) throws(LoopError) {
        try Platform.checkWatchable(path)
        self.path = path
        let inbox = FileWatchInbox()
        self.inbox = inbox
        source = LoopSource(order: 0) { inbox.deliver(handler) }
        inbox.attach(self)
        source.keepAlive(self)
    }

    deinit {
        source.invalidate()
    }

    /// Whether the watch is still in service: false once it was invalidated, once it delivered
    /// `watchedItemGone`, or once its loop ended.
    ///
    /// Any thread.
    public var isValid: Bool { source.isValid }

    /// Why the loop could not watch the path when the watch was added (the item went meanwhile,
    /// or a limit was reached), if that happened; the watch then reported `watchedItemGone`.
    ///
    /// Any thread.
    public var error: LoopError? { inbox.error }

    /// Stops watching for good: removes the watch from its loop, drops the changes not delivered
    /// yet and releases the handler.
    ///
    /// Any thread, including from inside the handler.
    public func invalidate() {
        source.invalidate()
        if let loop = source.owner { loop.fileWatchHub?.unregister(self) }
    }

    /// Makes the handler run with `error` and `watchedItemGone`: the path could not be watched
    /// when the watch was added to a loop.
    func fail(_ error: LoopError) {
        inbox.fail(error)
        source.signal()
    }
}

extension Loop {
    /// Adds a file watch to `mode` (`.common`: every common mode, now and later); the loop starts
    /// watching its path if it was in none of the loop's modes.
    ///
    /// Any thread. Adding it again to a mode it is in, adding an invalidated watch, or adding to a
    /// loop that has ended does nothing (the watch stays free for another loop). A watch belongs
    /// to one loop: adding it to a second loop is a programmer error.
    public func add(_ watch: LoopFileWatch, forMode mode: Mode) {
        guard watch.isValid, !hasEnded else { return }
        do {
            try fileWatchHubCreating().add(watch, forMode: mode)
        } catch {
            // No inotify instance for this loop: the watch says so rather than never firing.
            add(watch.source, forMode: mode)
            if contains(watch.source, inMode: mode) { watch.fail(error) }
        }
    }

    /// Removes a file watch from `mode` without invalidating it; removed from its last mode, it
    /// stops watching until it is added again.
    ///
    /// Any thread. Removing a watch that is not there does nothing.
    public func remove(_ watch: LoopFileWatch, forMode mode: Mode) {
        if let hub = fileWatchHub {
            hub.remove(watch, forMode: mode)
        } else {
            remove(watch.source, forMode: mode)
        }
    }

    /// Whether a file watch is in `mode` (`.common`: whether it was added to `.common`).
    ///
    /// Any thread.
    public func contains(_ watch: LoopFileWatch, inMode mode: Mode) -> Bool {
        contains(watch.source, inMode: mode)
    }
}
