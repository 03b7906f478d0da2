import Glibc

// Listening sockets the process inherited: from systemd's socket activation (LISTEN_FDS), or
// from a supervisor that bound them before starting it.

extension LoopListener {
    /// A listener over `descriptor`, a listening stream socket the process inherited (a
    /// supervisor bound it, or systemd passed it): it accepts once added to a loop, as a listener
    /// made with an address does. The descriptor is made non-blocking and close-on-exec, and is
    /// the listener's from then on (closed when it is invalidated); a Unix socket's path stays,
    /// as whoever bound it owns it.
    ///
    /// Any thread. Throws a `LoopError` with `systemError` set, leaving the descriptor open, if it
    /// is not open (`EBADF`), not a socket (`ENOTSOCK`), or not a listening stream socket
    /// (`EINVAL`).
    public static func adopting(
        descriptor: Int32, accept: sending @escaping (LoopConnection) -> Void
    ) throws(LoopError) -> LoopListener {
        try Platform.adoptListeningSocket(descriptor)
        return try LoopListener(adopted: descriptor, accept)
    }

    /// The listening sockets systemd passed to this process (socket activation: `LISTEN_PID` is
    /// this process's id, `LISTEN_FDS` counts the descriptors from 3), as listeners sharing one
    /// accept handler; `[]` when none were passed. As `sd_listen_fds` does, `LISTEN_PID`,
    /// `LISTEN_FDS` and `LISTEN_FDNAMES` are removed from the environment, so that children do not
    /// take them for theirs.
    ///
    /// Any thread; call it once, early (the variables are gone after). Throws as
    /// ``adopting(descriptor:accept:)`` for a descriptor that is not a listening stream socket
    /// (a datagram socket in a `.socket` unit, for example), leaving every passed descriptor open,
    /// and a `LoopError` for a malformed `LISTEN_FDS`.
    public static func systemdListeners(
        accept: @escaping @Sendable (LoopConnection) -> Void
    ) throws(LoopError) -> [LoopListener] {
        let pid = Platform.environmentVariable("LISTEN_PID")
        let count = Platform.environmentVariable("LISTEN_FDS")
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { Platform.removeEnvironmentVariable(name) }
        guard let pid, let count, Int32(pid) == Platform.processID else { return [] }
        guard let total = Int32(count), total >= 0, total < 1 << 16 else {
            throw LoopError("LISTEN_FDS is not a count of descriptors: \"\(count)\"", systemError: EINVAL)
        }
        // sd_listen_fds's first descriptor.
        let first: Int32 = 3
        let descriptors = Array(first..<first + total)
        // Every one checked before any becomes a listener: one refused leaves them all open.
        for descriptor in descriptors { try Platform.adoptListeningSocket(descriptor) }
        var listeners: [LoopListener] = []
        for descriptor in descriptors { listeners.append(try LoopListener(adopted: descriptor, accept)) }
        return listeners
    }
}
