import Glibc

// Starting a child and the system calls around its pidfd (the calls Swift's Glibc module does
// not import are wrapped in `Platform`).

/// What a process does with its pidfd.
enum ProcessCalls {
    /// `pidfd_send_signal(pidfd, signal, NULL, 0)`; errno on failure.
    static func sendSignal(_ pidfd: Int32, _ signal: Int32) -> Int32? {
        Platform.pidfdSendSignal(pidfd, signal)
    }

    /// `waitid(P_PIDFD, pidfd, WEXITED | WNOHANG)`: the child's status if it has exited (and is
    /// now reaped), nil if it still runs, or the errno if it cannot be waited for (`ECHILD`: some
    /// other code reaped it).
    static func reap(_ pidfd: Int32) -> Result<LoopProcess.Status, LoopError>? {
        var info = siginfo_t()
        while waitid(P_PIDFD, id_t(pidfd), &info, WEXITED | WNOHANG) != 0 {
            let code = errno
            guard code == EINTR else {
                return .failure(LoopError("waitid(P_PIDFD) failed: \(describe(code))", systemError: code))
            }
        }
        guard info._sifields._sigchld.si_pid != 0 else { return nil }
        let value = info._sifields._sigchld.si_status
        return .success(info.si_code == CLD_EXITED ? .exited(value) : .signalled(value))
    }

    static func describe(_ code: Int32) -> String {
        "\(String(cString: strerror(code))) (errno \(code))"
    }
}

extension LoopProcess {
    /// Starts the child with `posix_spawn` and opens its pidfd; `streams` holds, for each
    /// `.connection` choice, this process's end of the socket pair (non-blocking, close-on-exec).
    ///
    /// Only descriptors 0, 1 and 2 reach the child (every other one is closed in it, whether or
    /// not it is close-on-exec); its signal mask is empty and every signal has its default action
    /// (a server that ignores `SIGPIPE` does not pass that on).
    static func spawn(
        executable: String, arguments: [String], environment: [String: String]?, workingDirectory: String?,
        stdio: [Stdio]
    ) throws(LoopError) -> (pid: pid_t, pidfd: Int32, streams: [Int32?]) {
        if let workingDirectory { try checkDirectory(workingDirectory) }
        let pairs = try makeSocketPairs(for: stdio)
        var started = false
        defer {
            // The child has its ends (or there is no child): this process keeps only its own.
            for case (let parent, let child)? in pairs {
                close(child)
                if !started { close(parent) }
            }
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let workingDirectory {
            try check(Platform.spawnAddChdir(&actions, workingDirectory), "posix_spawn_file_actions_addchdir_np")
        }
        for (target, choice) in stdio.enumerated() {
            try addStdio(choice, as: Int32(target), childEnd: pairs[target]?.child, to: &actions)
        }
        try check(Platform.spawnAddCloseFrom(&actions, 3), "posix_spawn_file_actions_addclosefrom_np")

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        try check(
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)),
            "posix_spawnattr_setflags")

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for entry in envp ?? [] { free(entry) } }

        var pid = pid_t()
        // glibc reports a failed chdir, open or exec in the child as posix_spawn's result.
        let code = argv.withUnsafeBufferPointer { argv in
            if let envp {
                return envp.withUnsafeBufferPointer { envp in
                    posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, envp.baseAddress!)
                }
            }
            return posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, environ)
        }
        guard code == 0 else {
            let place = workingDirectory.map { " in \($0)" } ?? ""
            throw LoopError("cannot start \(executable)\(place): \(ProcessCalls.describe(code))", systemError: code)
        }
        let pidfd = Platform.pidfdOpen(pid)  // close-on-exec, as every pidfd is
        guard pidfd >= 0 else {
            let failure = errno
            // Not watchable, so not started: the child is ours, stop and reap it now.
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            throw LoopError(
                "cannot watch process \(pid): pidfd_open failed: \(ProcessCalls.describe(failure))",
                systemError: failure)
        }
        started = true
        return (pid, pidfd, pairs.map { $0?.parent })
    }

    /// A socket pair for each `.connection` choice (nil for the others): `parent` non-blocking,
    /// both ends close-on-exec and above 2, so that no file action moving one onto 0, 1 or 2
    /// overwrites another still to be moved. On failure nothing stays open.
    private static func makeSocketPairs(for stdio: [Stdio]) throws(LoopError) -> [(parent: Int32, child: Int32)?] {
        var pairs: [(parent: Int32, child: Int32)?] = []
        for choice in stdio {
            guard choice == .connection else {
                pairs.append(nil)
                continue
            }
            guard let (parent, child) = Platform.streamSocketPair() else {
                let code = errno
                for case (let parent, let child)? in pairs {
                    close(parent)
                    close(child)
                }
                throw LoopError("socketpair failed: \(ProcessCalls.describe(code))", systemError: code)
            }
            let ends = (parent: aboveStandard(parent), child: aboveStandard(child))
            _ = fcntl(ends.parent, F_SETFL, fcntl(ends.parent, F_GETFL) | O_NONBLOCK)
            pairs.append(ends)
        }
        return pairs
    }

    /// `descriptor`, or a close-on-exec copy of it from 3 up if it is 0, 1 or 2 (this process had
    /// closed its own), the original closed.
    private static func aboveStandard(_ descriptor: Int32) -> Int32 {
        guard descriptor < 3 else { return descriptor }
        let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 3)
        guard copy >= 0 else { return descriptor }
        close(descriptor)
        return copy
    }

    /// The file action giving the child's descriptor `target` what `choice` asks for.
    ///
    /// A stream's `childEnd` is duplicated onto `target` (a duplicate is not close-on-exec, and
    /// the closing of descriptors from 3 up then removes the original in the child).
    private static func addStdio(
        _ choice: Stdio, as target: Int32, childEnd: Int32?, to actions: inout posix_spawn_file_actions_t
    ) throws(LoopError) {
        switch choice {
        case .inherit:
            return
        case .null:
            let flags = target == STDIN_FILENO ? O_RDONLY : O_WRONLY
            try check(posix_spawn_file_actions_addopen(&actions, target, "/dev/null", flags, 0), "addopen(/dev/null)")
        case .connection:
            try check(posix_spawn_file_actions_adddup2(&actions, childEnd!, target), "adddup2")
        }
    }

    /// A missing or non-directory working directory, named as such rather than as a failed spawn.
    private static func checkDirectory(_ path: String) throws(LoopError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            throw LoopError("working directory \(path): \(ProcessCalls.describe(code))", systemError: code)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw LoopError("working directory \(path) is not a directory", systemError: ENOTDIR)
        }
    }

    private static func check(_ code: Int32, _ call: String) throws(LoopError) {
        guard code != 0 else { return }
        throw LoopError("\(call) failed: \(ProcessCalls.describe(code))", systemError: code)
    }
}

/// Reaps the children of processes dropped while their child still ran: each pidfd is watched on
/// one library thread, started on first use, and closed once its child is reaped.
enum ProcessReaper {
    private static let thread = LoopThread(name: "rlk-reaper")

    /// Takes over `pidfd` (owned from now on). Any thread.
    static func adopt(_ pidfd: Int32) {
        let source = LoopDescriptorSource(unchecked: pidfd, events: .readable, closesDescriptor: true) { source, _ in
            if ProcessCalls.reap(source.fileDescriptor) != nil { source.invalidate() }
        }
        thread.loop.add(source, forMode: .default)
    }
}
