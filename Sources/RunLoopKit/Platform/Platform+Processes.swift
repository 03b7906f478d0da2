internal import CPlatform
import Glibc

// Child processes: posix_spawn and its file actions, pidfds, reaping. The EINTR rule:
// SystemCall.swift (posix_spawn and the file actions return an error number instead).

extension Platform {
    // MARK: Spawning

    /// The file actions of a `posix_spawn`, freed with the value: what the child's descriptors and
    /// working directory become before it executes.
    struct SpawnActions: ~Copyable {
        fileprivate let raw = UnsafeMutablePointer<posix_spawn_file_actions_t>.allocate(capacity: 1)

        init() { posix_spawn_file_actions_init(raw) }

        deinit {
            posix_spawn_file_actions_destroy(raw)
            raw.deallocate()
        }

        /// `posix_spawn_file_actions_addchdir_np`: the child starts in `path`.
        func changeDirectory(to path: String) -> Result<Void, Errno> {
            errorNumber(rlk_spawn_add_chdir(raw, path))
        }

        /// `posix_spawn_file_actions_addopen`: the child's `target` is `path`, opened with `flags`.
        func open(_ path: String, flags: Int32, as target: Int32) -> Result<Void, Errno> {
            errorNumber(posix_spawn_file_actions_addopen(raw, target, path, flags, 0))
        }

        /// `posix_spawn_file_actions_adddup2`: the child's `target` is a copy of `descriptor`.
        func duplicate(_ descriptor: Int32, as target: Int32) -> Result<Void, Errno> {
            errorNumber(posix_spawn_file_actions_adddup2(raw, descriptor, target))
        }

        /// `posix_spawn_file_actions_addclosefrom_np`: every descriptor from `lowest` up is closed
        /// in the child, close-on-exec or not.
        func closeAll(from lowest: Int32) -> Result<Void, Errno> {
            errorNumber(rlk_spawn_add_close_from(raw, lowest))
        }
    }

    /// `posix_spawn` of `executable` with `arguments` (after `name`, its `argv[0]`), `environment`
    /// (nil: this process's) and `actions`; the child starts with an empty signal mask and every
    /// signal at its default action, and with `newProcessGroup` leads a process group of its own
    /// (`POSIX_SPAWN_SETPGROUP`, group 0: the group's id is the child's pid). The child's process
    /// id. glibc reports a failed chdir, open or exec in the child as the spawn's failure.
    static func spawn(
        _ executable: String, name: String, arguments: [String], environment: [String: String]?,
        newProcessGroup: Bool, actions: borrowing SpawnActions
    ) -> Result<pid_t, Errno> {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        var flags = Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if newProcessGroup {
            if case .failure(let failure) = errorNumber(posix_spawnattr_setpgroup(&attributes, 0)) {
                return .failure(failure)
            }
            flags |= Int16(POSIX_SPAWN_SETPGROUP)
        }
        if case .failure(let failure) = errorNumber(posix_spawnattr_setflags(&attributes, flags)) {
            return .failure(failure)
        }

        let argv = ([name] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for entry in envp ?? [] { free(entry) } }

        var pid = pid_t()
        let code = argv.withUnsafeBufferPointer { argv in
            if let envp {
                return envp.withUnsafeBufferPointer { envp in
                    posix_spawn(&pid, executable, actions.raw, &attributes, argv.baseAddress!, envp.baseAddress!)
                }
            }
            return posix_spawn(&pid, executable, actions.raw, &attributes, argv.baseAddress!, environ)
        }
        return errorNumber(code).map { pid }
    }

    /// `kill(pid, SIGKILL)`, then `waitpid` until the child is reaped: for a child that must not
    /// outlive a failed start.
    static func killAndReap(_ pid: pid_t) {
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = retryingInterrupts { waitpid(pid, &status, 0) }
    }

    /// `kill(-group, signal)`: every process of process group `group`. Only safe while the
    /// group's leader is not reaped, since the group's id is its pid (see `LoopProcess.signalGroup`).
    static func signalProcessGroup(_ group: pid_t, _ signal: Int32) -> Result<Void, Errno> {
        retryingInterrupts { kill(-group, signal) }.map { _ in }
    }

    // MARK: Finding an executable

    /// Whether `path` names a file `execve` would run: success, or the `stat` failure (`ENOENT`,
    /// `ENOTDIR`, …), or `EACCES` for a file that is not regular or not executable (`access`).
    static func checkExecutable(_ path: String) -> Result<Void, Errno> {
        var info = stat()
        if case .failure(let failure) = retryingInterrupts({ stat(path, &info) }) { return .failure(failure) }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(Errno(EACCES)) }
        return retryingInterrupts { access(path, X_OK) }.map { _ in }
    }

    /// `getenv(name)`: this process's environment variable, if set.
    static func environmentVariable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// `unsetenv(name)`: removes the variable from this process's environment (and its children's).
    static func removeEnvironmentVariable(_ name: String) {
        unsetenv(name)
    }

    // MARK: pidfds

    /// `pidfd_open(pid, 0)`: a close-on-exec descriptor that turns readable when the child exits.
    static func pidfdOpen(_ pid: pid_t) -> Result<Int32, Errno> {
        retryingInterrupts { rlk_pidfd_open(pid) }
    }

    /// `pidfd_send_signal(pidfd, signal, NULL, 0)`: never reaches a process that reused the id.
    static func pidfdSendSignal(_ pidfd: Int32, _ signal: Int32) -> Result<Void, Errno> {
        retryingInterrupts { rlk_pidfd_send_signal(pidfd, signal) }.map { _ in }
    }

    /// `waitid(P_PIDFD, pidfd, WEXITED | WNOHANG)`: the child's status if it has exited (and is
    /// now reaped), nil if it still runs, or a `LoopError` if it cannot be waited for (`ECHILD`:
    /// some other code reaped it).
    static func reap(_ pidfd: Int32) -> Result<LoopProcess.Status, LoopError>? {
        var info = siginfo_t()
        let waited = retryingInterrupts { waitid(P_PIDFD, id_t(pidfd), &info, WEXITED | WNOHANG) }
        if case .failure(let failure) = waited { return .failure(.systemCall("waitid(P_PIDFD)", failedWith: failure)) }
        guard info._sifields._sigchld.si_pid != 0 else { return nil }
        let value = info._sifields._sigchld.si_status
        return .success(info.si_code == CLD_EXITED ? .exited(value) : .signalled(value))
    }
}
