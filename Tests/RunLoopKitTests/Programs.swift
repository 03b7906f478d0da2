import Foundation
import Glibc
import Testing

@testable import RunLoopKit

// Programs run as a user runs them: one of the package's executables (the documentation's programs
// in Examples/, the demo), started as a child process with `posix_spawn`, its standard input from
// a pipe or /dev/null, its output collected, its exit status, wall time and CPU time (user + system,
// from `wait4`) measured, and a watchdog that kills it if it outlives its time.

/// How a program ended.
enum Termination: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)

    var description: String {
        switch self {
        case .exited(let code): "exited(\(code))"
        case .signalled(let signal): "signalled(\(signal))"
        }
    }
}

/// Where a program's standard input comes from.
enum ProgramInput {
    /// A pipe that gets these bytes and is then closed.
    case bytes([UInt8])
    /// A pipe the test writes to (`RunningProgram.write`) and closes (`closeInput()`).
    case pipe
    /// `/dev/null`, as under nohup, cron or systemd.
    case null
    /// A file, as with `program < file`.
    case file(String)
}

/// Where a program's standard output goes (standard error always goes to a pipe).
enum ProgramOutput {
    /// A pipe: the C library buffers what the program prints until it exits or flushes.
    case pipe
    /// A pseudo-terminal, as in a shell: the C library sends each line as it is printed.
    case terminal
}

/// What a program did, once it ended.
struct ProgramOutcome: CustomStringConvertible {
    let name: String
    let termination: Termination
    /// The watchdog killed it: it did not end within its time.
    let hung: Bool
    let output: String
    let errorOutput: String
    /// From the spawn to the reaping.
    let wall: Duration
    /// User and system time of the program and its threads (children it reaped included).
    let cpu: Duration

    var lines: [String] { output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }

    var description: String {
        let state = hung ? "HUNG (killed by the watchdog)" : termination.description
        return """
            \(name): \(state) after \(Int(wall.milliseconds)) ms, \(Int(cpu.milliseconds)) ms of CPU
            standard output:
            \(output)
            standard error:
            \(errorOutput)
            """
    }
}

/// The CPU a program may use: `fixed` for starting and doing its work (scaled under a sanitizer,
/// whose runtime makes every step slower), plus 5 % of one core for the time it waited (25 %
/// under a sanitizer: ThreadSanitizer's background thread runs while the program sleeps, 80 ms in
/// a second of waiting in one run; a program that polls instead of sleeping still uses four times
/// that).
func cpuAllowance(fixed: Duration = .milliseconds(20), waiting: Duration) -> Duration {
    fixed * (StressTests.sanitized ? 10 : 1) + waiting * (StressTests.sanitized ? 0.25 : 0.05)
}

/// Checks that `outcome` ended by itself with status 0 and used no more CPU than a program that
/// spent its wall time waiting may use, beyond `work` for its start and its work.
func expectQuietExit(
    _ outcome: ProgramOutcome, work: Duration = .milliseconds(20), sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(!outcome.hung, "\(outcome)", sourceLocation: sourceLocation)
    #expect(outcome.termination == .exited(0), "\(outcome)", sourceLocation: sourceLocation)
    #expect(
        outcome.cpu < cpuAllowance(fixed: work, waiting: outcome.wall), "CPU while waiting: \(outcome)",
        sourceLocation: sourceLocation)
}

/// Runs the package's executable `name` and checks that it ends quietly (`expectQuietExit`),
/// printing `lines` if given, within `wall` if given: for a program whose run ends long before
/// its timeout, that tells a run that finished from one that waited its timeout out.
@discardableResult
func expectProgram(
    _ name: String, prints lines: [String]? = nil, within wall: Duration? = nil, work: Duration = .milliseconds(20),
    sourceLocation: SourceLocation = #_sourceLocation
) async throws -> ProgramOutcome {
    let outcome = try await RunningProgram.run(name)
    expectQuietExit(outcome, work: work, sourceLocation: sourceLocation)
    if let lines { #expect(outcome.lines == lines, "\(outcome)", sourceLocation: sourceLocation) }
    if let wall { #expect(outcome.wall < wall, "ended within \(wall): \(outcome)", sourceLocation: sourceLocation) }
    return outcome
}

/// A program started by `RunningProgram.start`; `finish` waits for it.
final class RunningProgram: Sendable {
    let name: String
    let pid: pid_t
    let started: ContinuousClock.Instant
    private let input: Locked<Int32?>
    private let collected = Locked((output: [UInt8](), errors: [UInt8](), readerDone: false))
    private let ended = Locked<(status: Int32, usage: rusage, at: ContinuousClock.Instant)?>(nil)
    private let exited = DispatchSemaphore(value: 0)
    private let outputClosed = DispatchSemaphore(value: 0)
    /// Output that comes through a pseudo-terminal has its newlines as "\r\n".
    private let throughTerminal: Bool

    /// The path of the package's executable `name`: next to the test bundle (.build/<config>/).
    static func path(of name: String) throws -> String {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL.deletingLastPathComponent(),
        ].map { $0.appendingPathComponent(name).path }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw LoopError("\(name) not found at \(candidates) (swift build --build-tests builds it)")
        }
        return found
    }

    /// Starts the package's executable `name` with `arguments`.
    static func start(
        _ name: String, arguments: [String] = [], input: ProgramInput = .null, output: ProgramOutput = .pipe
    ) throws -> RunningProgram {
        try start(path: path(of: name), name: name, arguments: arguments, input: input, output: output)
    }

    /// Starts the executable at `path` (with the library's `posix_spawn`: its signals start
    /// unblocked and at their default actions, and it gets no descriptor of this process but 0, 1
    /// and 2).
    static func start(
        path: String, name: String, arguments: [String] = [], input: ProgramInput = .null,
        output: ProgramOutput = .pipe, environment: [String: String]? = nil
    ) throws -> RunningProgram {
        let actions = Platform.SpawnActions()
        var ours: [Int32] = []  // this process's ends, closed here if the spawn fails
        var theirs: [Int32] = []  // the child's, closed here once it runs
        defer { for descriptor in theirs { close(descriptor) } }
        func check(_ result: Result<Void, Errno>) throws {
            if case .failure(let failure) = result { throw LoopError("spawn file action failed: \(failure)") }
        }

        var inputWriter: Int32?
        switch input {
        case .null:
            try check(actions.open("/dev/null", flags: O_RDONLY, as: 0))
        case .file(let path):
            try check(actions.open(path, flags: O_RDONLY, as: 0))
        case .bytes, .pipe:
            let (reader, writer) = try makePipe()
            theirs.append(reader)
            ours.append(writer)
            inputWriter = writer
            try check(actions.duplicate(reader, as: 0))
        }
        let (outputReader, outputWriter) = try output == .pipe ? makePipe() : makeTerminal()
        ours.append(outputReader)
        theirs.append(outputWriter)
        try check(actions.duplicate(outputWriter, as: 1))
        let (errorReader, errorWriter) = try makePipe()
        ours.append(errorReader)
        theirs.append(errorWriter)
        try check(actions.duplicate(errorWriter, as: 2))
        try check(actions.closeAll(from: 3))

        let started = ContinuousClock.now
        let pid: pid_t
        switch Platform.spawn(
            path, name: path, arguments: arguments, environment: environment, newProcessGroup: false, actions: actions)
        {
        case .success(let spawned): pid = spawned
        case .failure(let failure):
            for descriptor in ours { close(descriptor) }
            throw LoopError("posix_spawn \(path) failed: \(failure)", systemError: failure.code)
        }
        let program = RunningProgram(
            name: name, pid: pid, started: started, input: inputWriter, output: outputReader,
            errors: errorReader, throughTerminal: output == .terminal)
        if case .bytes(let bytes) = input {
            program.write(bytes)
            program.closeInput()
        }
        return program
    }

    private init(
        name: String, pid: pid_t, started: ContinuousClock.Instant, input: Int32?, output: Int32, errors: Int32,
        throughTerminal: Bool
    ) {
        self.name = name
        self.pid = pid
        self.started = started
        self.input = Locked(input)
        self.throughTerminal = throughTerminal
        Thread { [self] in
            var status: Int32 = 0
            var usage = rusage()
            while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
            ended.withLock { $0 = (status, usage, ContinuousClock.now) }
            exited.signal()
        }.start()
        Thread { [self] in
            readOutput(output, errors)
            outputClosed.signal()
        }.start()
    }

    /// Reads standard output and standard error until both end, or until 2 s after the program
    /// ended (a child it left running may hold them open).
    private func readOutput(_ output: Int32, _ errors: Int32) {
        defer {
            close(output)
            close(errors)
        }
        var open: [Int32: Bool] = [output: true, errors: true]
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var endedAt: ContinuousClock.Instant?
        while open.values.contains(true) {
            if endedAt == nil, ended.withLock({ $0 != nil }) { endedAt = .now }
            if let endedAt, ContinuousClock.now - endedAt > .seconds(2) { break }
            var polled = open.filter(\.value).map { pollfd(fd: $0.key, events: Int16(POLLIN), revents: 0) }
            guard poll(&polled, nfds_t(polled.count), 100) >= 0 || errno == EINTR else { break }
            for entry in polled where entry.revents != 0 {
                let count = read(entry.fd, &buffer, buffer.count)
                // A terminal whose other side is closed reads EIO: its end.
                guard count > 0 else {
                    open[entry.fd] = false
                    continue
                }
                collected.withLock {
                    if entry.fd == output { $0.output += buffer[..<count] } else { $0.errors += buffer[..<count] }
                }
            }
        }
    }

    /// Standard output so far.
    var output: String {
        let text = String(decoding: collected.withLock { $0.output }, as: UTF8.self)
        return throughTerminal ? text.replacingOccurrences(of: "\r\n", with: "\n") : text
    }

    /// Writes `bytes` to the program's standard input (a `.pipe`).
    func write(_ bytes: [UInt8]) {
        input.withLock { descriptor in
            guard let descriptor else { return }
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    /// Closes the program's standard input: it reads the end of its input.
    func closeInput() {
        input.withLock { descriptor in
            if let descriptor { close(descriptor) }
            descriptor = nil
        }
    }

    /// Sends `signal` to the program (nothing once it has been reaped).
    func send(_ signal: Int32) {
        ended.withLock { if $0 == nil { kill(pid, signal) } }
    }

    /// Waits (up to `limit`) until standard output holds `text`; returns whether it does.
    func waitForOutput(_ text: String, within limit: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while !output.contains(text) {
            guard ContinuousClock.now < deadline, ended.withLock({ $0 == nil }) else { return output.contains(text) }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// The CPU time the program has used so far (its threads', live and ended), from
    /// /proc/<pid>/stat; nil once it has been reaped.
    var cpuSoFar: Duration? { RunningProgram.cpuTime(of: pid) }

    /// The CPU time process `pid` has used so far (utime + stime of /proc/<pid>/stat).
    static func cpuTime(of pid: pid_t) -> Duration? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        // After the command's ")": state (field 3), ..., utime (14), stime (15).
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return .milliseconds((user + system) * 1000 / sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The CPU the program uses while the test does nothing for `window`: what it costs while it
    /// waits. Nil if it ended meanwhile.
    func cpuWhileIdle(for window: Duration = .seconds(1)) async -> Duration? {
        guard let before = cpuSoFar else { return nil }
        try? await Task.sleep(for: window)  // the measuring window itself, not a wait for an event
        guard let after = cpuSoFar else { return nil }
        return after - before
    }

    /// Waits for the program to end; a program still running `limit` after this call is killed
    /// (SIGKILL) and reported as hung. Counted from the call, not from the program's start: in a
    /// full parallel run a test's task may wait seconds for one of Swift concurrency's few threads
    /// between two of its steps (closing the input, say), time the program did not take. The
    /// wait holds a thread of its own, not one of those, which other tests need meanwhile.
    func finish(within limit: Duration = .seconds(20)) async -> ProgramOutcome {
        await awaitFreshThread { [self] in finishBlocking(within: limit) }
    }

    /// `finish`, blocking the calling thread: for a wait that is over at once (`tmux -V`).
    func finishBlocking(within limit: Duration = .seconds(20)) -> ProgramOutcome {
        let hung = exited.wait(timeout: .now() + .milliseconds(Int(limit.milliseconds))) == .timedOut
        if hung {
            kill(pid, SIGKILL)
            exited.wait()
        }
        closeInput()
        outputClosed.wait()
        let (status, usage, at) = ended.withLock { $0! }
        let signalled = status & 0x7f
        let termination: Termination = signalled == 0 ? .exited((status >> 8) & 0xff) : .signalled(signalled)
        func duration(_ time: timeval) -> Duration { .seconds(time.tv_sec) + .microseconds(time.tv_usec) }
        return ProgramOutcome(
            name: name, termination: termination, hung: hung, output: output,
            errorOutput: String(decoding: collected.withLock { $0.errors }, as: UTF8.self),
            wall: at - started, cpu: duration(usage.ru_utime) + duration(usage.ru_stime))
    }

    /// Runs the package's executable `name` to its end (or the watchdog's, after `limit`).
    static func run(
        _ name: String, arguments: [String] = [], input: ProgramInput = .null, output: ProgramOutput = .pipe,
        within limit: Duration = .seconds(20)
    ) async throws -> ProgramOutcome {
        try await start(name, arguments: arguments, input: input, output: output).finish(within: limit)
    }
}

/// A pipe: (read end, write end), close-on-exec: other tests of this process start children too
/// (Foundation's `Process` among them), and a child that inherited the write end of a program's
/// input would keep the program from ever reading its end. The spawn's `dup2` onto 0, 1 and 2
/// clears the flag on the program's own copies.
private func makePipe() throws -> (Int32, Int32) {
    var ends: [Int32] = [0, 0]
    guard GNU.pipe2(&ends, O_CLOEXEC) == 0 else { throw LoopError("pipe failed", systemError: errno) }
    return (ends[0], ends[1])
}

/// A pseudo-terminal: (its controlling side, read here; the terminal, the child's standard output).
/// Its calls are glibc's, which the Glibc module does not show (they need _XOPEN_SOURCE): `GNU`.
private func makeTerminal() throws -> (Int32, Int32) {
    let controller = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)  // what posix_openpt does
    guard controller >= 0 else { throw LoopError("opening /dev/ptmx failed", systemError: errno) }
    var name = [CChar](repeating: 0, count: 128)
    guard GNU.grant(controller) == 0, GNU.unlock(controller) == 0,
        GNU.name(controller, &name, name.count) == 0
    else {
        let failure = errno
        close(controller)
        throw LoopError("setting up a pseudo-terminal failed", systemError: failure)
    }
    let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let terminal = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
    guard terminal >= 0 else {
        let failure = errno
        close(controller)
        throw LoopError("opening \(path) failed", systemError: failure)
    }
    return (controller, terminal)
}

/// glibc's pseudo-terminal calls and `pipe2`, looked up by name.
private enum GNU {
    static let pipe2 = function("pipe2", as: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)
    static let grant = function("grantpt", as: (@convention(c) (Int32) -> Int32).self)
    static let unlock = function("unlockpt", as: (@convention(c) (Int32) -> Int32).self)
    static let name = function(
        "ptsname_r", as: (@convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32).self)

    private static func function<T>(_ symbol: String, as type: T.Type) -> T {
        guard let address = dlsym(dlopen(nil, RTLD_NOW), symbol) else { preconditionFailure("glibc has no \(symbol)") }
        return unsafeBitCast(address, to: type)
    }
}
