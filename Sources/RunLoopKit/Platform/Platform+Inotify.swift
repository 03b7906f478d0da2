import Glibc

// File watching: inotify instances, their watches, and the events read from them. The EINTR rule:
// SystemCall.swift (inotify_init1, inotify_add_watch and inotify_rm_watch are never interrupted;
// reads go through `read(_:into:)`).

extension Platform {
    /// What a `LoopFileWatch` asks the kernel for: changes to the item and, for a directory, to
    /// its children; the item itself deleted or moved away.
    static let fileWatchMask = UInt32(
        IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF
            | IN_MOVE_SELF)

    /// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`: a loop's one inotify instance. Throws with
    /// `systemError` set: `EMFILE` once the user's instances (fs.inotify.max_user_instances) or the
    /// process's descriptors ran out.
    static func openInotify() throws(LoopError) -> Int32 {
        try retryingInterrupts { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }.get(failing: "inotify_init1")
    }

    /// `inotify_add_watch(instance, path, mask)`: the watch descriptor, the same one for every
    /// path naming the same file or directory in one instance. A path with a NUL byte fails with
    /// `EINVAL` (C would see a shorter path).
    static func addInotifyWatch(_ instance: Int32, path: String, mask: UInt32) -> Result<Int32, Errno> {
        guard !path.utf8.contains(0) else { return .failure(Errno(EINVAL)) }
        return retryingInterrupts { inotify_add_watch(instance, path, mask) }
    }

    /// `inotify_rm_watch`; a watch the kernel already dropped (`EINVAL`) is no failure here.
    static func removeInotifyWatch(_ instance: Int32, _ watch: Int32) {
        _ = retryingInterrupts { inotify_rm_watch(instance, watch) }
    }

    /// Throws what `inotify_add_watch` would say of `path` (`ENOENT`, `EACCES`, `ENOTDIR`, `ENOSPC`
    /// once the user's watches ran out, ...), without a loop: one process-wide instance takes the
    /// watch and drops it again, under a lock, its queue drained each time.
    static func checkWatchable(_ path: String) throws(LoopError) {
        let outcome = inotifyProbe.withLock { probe -> Result<Void, Errno> in
            if probe == nil {
                switch retryingInterrupts({ inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }) {
                case .success(let instance): probe = instance
                case .failure(let failure): return .failure(failure)
                }
            }
            guard let instance = probe else { return .success(()) }
            switch addInotifyWatch(instance, path: path, mask: fileWatchMask) {
            case .failure(let failure): return .failure(failure)
            case .success(let watch):
                removeInotifyWatch(instance, watch)
                drain(instance)
                return .success(())
            }
        }
        if case .failure(let failure) = outcome {
            throw LoopError.systemCall("inotify_add_watch(\(path))", failedWith: failure)
        }
    }

    /// The instance behind `checkWatchable`, opened at the first check and kept.
    private static let inotifyProbe = Locked<Int32?>(nil)

    /// Reads and drops what an instance has queued (the probe's `IN_IGNORED` events).
    private static func drain(_ instance: Int32) {
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 8) { buffer in
            while case .success(let count) = read(instance, into: buffer), count > 0 {}
        }
    }

    /// One event read from an inotify instance.
    struct InotifyEvent {
        /// The watch descriptor; -1 for `IN_Q_OVERFLOW`.
        let watch: Int32
        let mask: UInt32
        /// A directory's child the event is about; nil for the watched item itself.
        let name: String?
    }

    /// The events in `bytes`, as `read` returned them. `struct inotify_event` is variable-length
    /// (16 bytes, then `len` bytes of NUL-padded name) and is read field by field with unaligned
    /// loads: nothing in the buffer is taken for an aligned C struct. A truncated last event ends
    /// the list.
    static func inotifyEvents(in bytes: UnsafeRawBufferPointer) -> [InotifyEvent] {
        let header = 16
        var events: [InotifyEvent] = []
        var offset = 0
        while offset + header <= bytes.count {
            let watch = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let start = offset + header
            guard start + length <= bytes.count else { break }
            let field = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + length)])
            let end = field.firstIndex(of: 0) ?? field.count
            let name = end == 0 ? nil : String(decoding: field[..<end], as: UTF8.self)
            events.append(InotifyEvent(watch: watch, mask: mask, name: name))
            offset = start + length
        }
        return events
    }
}
