import Glibc

// Starting a child: its standard streams and its pidfd (the system calls are `Platform`'s).

extension LoopProcess {
    /// Starts the child with `posix_spawn` and opens its pidfd; `streams` holds, for each
    /// `.connection` choice, this process's end of the socket pair (non-blocking, close-on-exec).
    ///
    /// Only descriptors 0, 1 and 2 reach the child (every other one is closed in it, whether or
    /// not it is close-on-exec); its signal mask is empty and every signal has its default action
    /// (a server that ignores `SIGPIPE` does not pass that on).
    static func spawn(
        executable: String, arguments: [String], environment: [String: String]?, workingDirectory: String?,
        stdio: [Stdio], newProcessGroup: Bool
    ) throws(LoopError) -> (pid: pid_t, pidfd: Int32, streams: [Int32?]) {
        if let workingDirectory { try checkDirectory(workingDirectory) }
        let path = try find(executable, environment: environment)
        let pairs = try makeSocketPairs(for: stdio)
        var started = false
        defer {
            // The child has its ends (or there is no child): this process keeps only its own.
            for case (let parent, let child)? in pairs {
                Platform.closeDescriptor(child)
                if !started { Platform.closeDescriptor(parent) }
            }
        }

        let actions = Platform.SpawnActions()
        if let workingDirectory {
            try actions.changeDirectory(to: workingDirectory).get(failing: "posix_spawn_file_actions_addchdir_np")
        }
        for (target, choice) in stdio.enumerated() {
            try addStdio(choice, as: Int32(target), childEnd: pairs[target]?.child, to: actions)
        }
        try actions.closeAll(from: 3).get(failing: "posix_spawn_file_actions_addclosefrom_np")

        let place = workingDirectory.map { " in \($0)" } ?? ""
        let pid = try Platform.spawn(
            path, name: executable, arguments: arguments, environment: environment, newProcessGroup: newProcessGroup,
            actions: actions
        ).get(failing: "cannot start \(executable)\(place): posix_spawn")
        let pidfd: Int32  // close-on-exec, as every pidfd is
        switch Platform.pidfdOpen(pid) {
        case .success(let opened):
            pidfd = opened
        case .failure(let failure):
            // Not watchable, so not started: the child is ours, stop and reap it now.
            Platform.killAndReap(pid)
            throw LoopError.systemCall("cannot watch process \(pid): pidfd_open", failedWith: failure)
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
            let parent: Int32
            let child: Int32
            switch Platform.streamSocketPair() {
            case .success(let made):
                (parent, child) = made
            case .failure(let failure):
                for case (let parent, let child)? in pairs {
                    Platform.closeDescriptor(parent)
                    Platform.closeDescriptor(child)
                }
                throw LoopError.systemCall("socketpair", failedWith: failure)
            }
            let ends = (parent: aboveStandard(parent), child: aboveStandard(child))
            Platform.setNonBlocking(ends.parent)
            pairs.append(ends)
        }
        return pairs
    }

    /// `descriptor`, or a close-on-exec copy of it from 3 up if it is 0, 1 or 2 (this process had
    /// closed its own), the original closed.
    private static func aboveStandard(_ descriptor: Int32) -> Int32 {
        guard descriptor < 3, case .success(let copy) = Platform.duplicate(descriptor, atLeast: 3) else {
            return descriptor
        }
        Platform.closeDescriptor(descriptor)
        return copy
    }

    /// The file action giving the child's descriptor `target` what `choice` asks for.
    ///
    /// A stream's `childEnd` is duplicated onto `target` (a duplicate is not close-on-exec, and
    /// the closing of descriptors from 3 up then removes the original in the child).
    private static func addStdio(
        _ choice: Stdio, as target: Int32, childEnd: Int32?, to actions: borrowing Platform.SpawnActions
    ) throws(LoopError) {
        switch choice {
        case .inherit:
            return
        case .null:
            let flags = target == STDIN_FILENO ? O_RDONLY : O_WRONLY
            try actions.open("/dev/null", flags: flags, as: target).get(failing: "addopen(/dev/null)")
        case .connection:
            try actions.duplicate(childEnd!, as: target).get(failing: "adddup2")
        }
    }

    /// The file to start for `executable`: itself if it holds a "/", otherwise the first
    /// executable file of that name in the directories of `PATH`, as `execvp` looks. The `PATH`
    /// searched is the one the child gets: `environment`'s when it is given (glibc's default,
    /// `/bin:/usr/bin`, if it has none), this process's otherwise. An empty entry is the current
    /// directory. Throws `ENOENT` when no entry has the name, `EACCES` when those that have it
    /// cannot be executed.
    private static func find(_ executable: String, environment: [String: String]?) throws(LoopError) -> String {
        guard !executable.contains("/") else { return executable }
        guard !executable.isEmpty else {
            throw LoopError("cannot start an executable without a name", systemError: ENOENT)
        }
        let search = (environment.map { $0["PATH"] } ?? Platform.environmentVariable("PATH")) ?? "/bin:/usr/bin"
        var denied = false
        for directory in search.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = directory.isEmpty ? executable : "\(directory)/\(executable)"
            switch Platform.checkExecutable(candidate) {
            case .success: return candidate
            case .failure(let failure): if failure.code == EACCES { denied = true }
            }
        }
        throw LoopError(
            "cannot start \(executable): \(denied ? "not executable" : "not found") in PATH \(search)",
            systemError: denied ? EACCES : ENOENT)
    }

    /// A missing or non-directory working directory, named as such rather than as a failed spawn.
    private static func checkDirectory(_ path: String) throws(LoopError) {
        guard try Platform.isDirectory(path).get(failing: "working directory \(path): stat") else {
            throw LoopError("working directory \(path) is not a directory", systemError: ENOTDIR)
        }
    }
}

/// Reaps the children of processes dropped while their child still ran: each pidfd is watched on
/// one library thread, started on first use, and closed once its child is reaped.
enum ProcessReaper {
    private static let thread = LoopThread(name: "rlk-reaper")

    /// Takes over `pidfd` (owned from now on). Any thread.
    static func adopt(_ pidfd: Int32) {
        let source = LoopDescriptorSource(unchecked: pidfd, events: .readable, closesDescriptor: true) { source, _ in
            if Platform.reap(source.fileDescriptor) != nil { source.invalidate() }
        }
        thread.loop.add(source, forMode: .default)
    }
}
