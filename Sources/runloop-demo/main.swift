// runloop-demo: the classic iOS run-loop scenarios, live on RunLoopKit.
//
// Each section prints what happens with a timestamp in milliseconds since the demo started:
//   1. the phases of a run, seen by an observer added to `.common`
//   2. an idle loop sleeps in the kernel: no CPU, no periodic wake-ups
//   3. a `.default` timer freezes while the loop runs `.tracking`; a `.common` timer keeps ticking
//   4. timer tolerance lets the loop serve two timers with one wake-up
//   5. a background `LoopThread` receiving work from the main thread with `perform`
//   6. `stop()` from another thread makes `run()` return
//   7. `DispatchQueue.main` and `@MainActor` work run on `Loop.main`
//   8. a trace of two loops (frame link, timers, an observer, a LoopThread receiving performs), a
//      hang report, and the trace written as .build/demo/trace.json (Perfetto) and trace.svg

import Dispatch
import Glibc
import RunLoopKit

// MARK: - Helpers

/// The instant the demo started; timestamps are relative to it.
enum Clock {
    static let start = ContinuousClock.now
}

/// Milliseconds since the demo started, right-aligned.
func ms() -> String {
    let (seconds, attoseconds) = Clock.start.duration(to: .now).components
    let millis = Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    let text = "\(millis) ms"
    return String(repeating: " ", count: max(0, 8 - text.count)) + text
}

/// Writes one line to standard output at once (unbuffered, so lines from threads never mix).
func emit(_ line: String) {
    var line = line + "\n"
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(STDOUT_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}

/// Prints one narrated line with a timestamp.
func say(_ text: String) {
    emit("\(ms())  \(text)")
}

/// Prints a section header.
func section(_ title: String) {
    emit("")
    emit("== \(title) " + String(repeating: "=", count: max(3, 86 - title.count)))
}

/// A readable name for one observer activity.
func activityName(_ activity: Loop.Activity) -> String {
    switch activity {
    case .entry: "entry"
    case .beforeTimers: "beforeTimers"
    case .beforeSources: "beforeSources"
    case .beforeWaiting: "beforeWaiting"
    case .afterWaiting: "afterWaiting"
    case .exit: "exit"
    default: "activity(\(activity.rawValue))"
    }
}

/// A readable name for a run result.
func resultName(_ result: Loop.RunResult) -> String {
    switch result {
    case .finished: ".finished"
    case .stopped: ".stopped"
    case .timedOut: ".timedOut"
    case .handledSource: ".handledSource"
    }
}

/// glibc's `pthread_getname_np`, which Swift's Glibc module hides (it is a GNU extension).
let pthreadGetName: (@convention(c) (pthread_t, UnsafeMutablePointer<CChar>?, Int) -> Int32)? = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "pthread_getname_np") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (pthread_t, UnsafeMutablePointer<CChar>?, Int) -> Int32).self)
}()

/// The name of the calling thread, as the kernel knows it.
func threadName() -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    guard let pthreadGetName, pthreadGetName(pthread_self(), &buffer, buffer.count) == 0 else { return "?" }
    return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

// MARK: - 1. Phases

/// An observer on `.common` prints every phase of a short run that serves a 40 ms timer twice.
func phases() {
    section("1. Phases of a run, seen by an observer on .common")
    let loop = Loop.current
    say("Loop.current on the main thread is Loop.main: \(loop === Loop.main)")

    let observer = LoopObserver(activities: .allActivities) { _, activity in
        say("  observer: \(activityName(activity))")
    }
    loop.add(observer, forMode: .common)

    let timer = LoopTimer(after: .milliseconds(40), repeating: .milliseconds(40)) { _ in
        say("    timer fired")
    }
    loop.add(timer, forMode: .default)

    say("run(mode: .default, for: 100 ms) with a timer repeating every 40 ms")
    let result = loop.run(mode: .default, for: .milliseconds(100))
    say("run returned \(resultName(result))")

    timer.invalidate()
    observer.invalidate()
}

// MARK: - 2. Idle

/// CPU time used by the calling thread so far, in milliseconds.
func threadCPUMilliseconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) * 1000 + Double(time.tv_nsec) / 1_000_000
}

/// A loop with one timer due in a second sleeps in the kernel until then.
func idle() {
    section("2. An idle loop sleeps in the kernel")
    let loop = Loop.current
    var wakeUps = 0
    let wakeObserver = LoopObserver(activities: .afterWaiting, loop.isolated { _, _ in wakeUps += 1 })
    loop.add(wakeObserver, forMode: .default)
    let timer = LoopTimer(after: .seconds(1)) { _ in
        say("  the timer fires after a second of sleep, and stops the run")
        loop.stop()
    }
    loop.add(timer, forMode: .default)

    say("run(mode: .default, for: 2 s) with a single one-shot timer due in 1 s")
    let cpuBefore = threadCPUMilliseconds()
    let result = loop.run(mode: .default, for: .seconds(2))
    let cpu = threadCPUMilliseconds() - cpuBefore
    say("run returned \(resultName(result)); the thread woke \(wakeUps) time(s)")
    let cpuText = cpu < 1 ? "under 1 ms" : "\(Int(cpu.rounded())) ms"
    say("CPU used by this thread during the run: \(cpuText)")
    wakeObserver.invalidate()
}

// MARK: - 3. Modes

/// A `.default` timer and a `.common` timer, both every 100 ms, while the loop switches modes.
func modes() {
    section("3. Modes: a .default timer freezes during .tracking; a .common one keeps ticking")
    let loop = Loop.current
    var ticks: [String: [String]] = ["default": [], "common": []]

    func makeTimer(_ name: String) -> LoopTimer {
        LoopTimer(
            after: .milliseconds(100), repeating: .milliseconds(100),
            loop.isolated { _ in
                let now = ms()
                ticks[name, default: []].append(now.trimmingLeadingSpaces)
                let mode = Loop.current.currentMode?.name ?? "-"
                emit("\(now)    \(name)-mode timer tick (loop running .\(mode))")
            })
    }
    let defaultTimer = makeTimer("default")
    let commonTimer = makeTimer("common")
    loop.add(defaultTimer, forMode: .default)
    loop.add(commonTimer, forMode: .common)

    /// Runs `mode` for `millis` ms; returns the tick times of each timer during the run.
    func stage(_ mode: Loop.Mode, _ millis: Int, _ why: String) -> (default: [String], common: [String]) {
        say("run(mode: .\(mode.name), for: \(millis) ms) — \(why)")
        ticks = ["default": [], "common": []]
        let result = loop.run(mode: mode, for: .milliseconds(millis))
        let counts = (ticks["default"]!, ticks["common"]!)
        say(
            "run returned \(resultName(result)): default timer ticked \(counts.0.count)x, common timer \(counts.1.count)x"
        )
        return counts
    }

    _ = stage(.default, 350, "both timers are in .default")
    let tracking = stage(.tracking, 400, "as during a scroll: only .common items are served")
    if tracking.default.isEmpty {
        say("the .default timer was frozen during .tracking; its fires wait, they are not dropped")
    } else {
        say("unexpected: the .default timer fired \(tracking.default.count)x during .tracking")
    }
    let back = stage(.default, 260, "back to .default")
    say("the .default timer ticked at \(back.default.joined(separator: ", ")):")
    say("  the fires it missed during .tracking collapsed into the first tick; then it kept its 100 ms phase")

    defaultTimer.invalidate()
    commonTimer.invalidate()
}

extension String {
    var trimmingLeadingSpaces: String { String(drop { $0 == " " }) }
}

// MARK: - 4. Tolerance

/// A timer due at 50 ms with 30 ms tolerance and one due at 70 ms fire in one wake-up at 70 ms.
func tolerance() {
    section("4. Tolerance: two timers, one wake-up")
    let loop = Loop.current
    let start = ContinuousClock.now
    var fired: [String] = []
    var wakeUps = 0

    func elapsed() -> Int {
        let (seconds, attoseconds) = start.duration(to: .now).components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    let wakeObserver = LoopObserver(activities: .afterWaiting, loop.isolated { _, _ in wakeUps += 1 })
    loop.add(wakeObserver, forMode: .default)
    let early = LoopTimer(
        after: .milliseconds(50), tolerance: .milliseconds(30),
        loop.isolated { _ in
            fired.append("A (due 50 ms, tolerance 30 ms) at \(elapsed()) ms")
        })
    let late = LoopTimer(
        after: .milliseconds(70),
        loop.isolated { _ in
            fired.append("B (due 70 ms, no tolerance) at \(elapsed()) ms")
            loop.stop()
        })
    loop.add(early, forMode: .default)
    loop.add(late, forMode: .default)

    let result = loop.run(mode: .default, for: .milliseconds(200))
    for line in fired { say("  timer \(line)") }
    say("the loop woke \(wakeUps) time(s) for both; run returned \(resultName(result))")
    wakeObserver.invalidate()
}

// MARK: - 5. Background thread

/// A `LoopThread` gets blocks from the main thread; the main loop waits for its answers on a source.
func backgroundThread() {
    section("5. A background LoopThread receiving work with perform")
    let main = Loop.current
    let worker = LoopThread(name: "demo-worker")
    say("started LoopThread(name: \"demo-worker\"); this thread is '\(threadName())'")

    // The worker answers by signalling a source on the main loop: signal() wakes the loop.
    let answers = Locked(0)
    let reply = LoopSource {}
    main.add(reply, forMode: .default)

    /// Runs the main loop until the worker has answered `count` times (at most 2 s).
    func waitForAnswers(_ count: Int) {
        let deadline = ContinuousClock.now + .seconds(2)
        while answers.current < count, ContinuousClock.now < deadline {
            main.run(mode: .default, until: deadline)
        }
        if answers.current < count { say("the worker did not answer in time") }
    }

    for job in 1...3 {
        worker.loop.perform {
            say("  job \(job) runs on thread '\(threadName())'")
            answers.withLock { $0 += 1 }
            reply.signal()
        }
        say("posted job \(job)")
    }
    waitForAnswers(3)
    say("the main loop woke for the answers")

    // Many blocks posted between two iterations cost one wake-up, not one each.
    let wakeUps = Locked(0)
    let counter = LoopObserver(activities: .afterWaiting) { _, _ in wakeUps.withLock { $0 += 1 } }
    worker.loop.add(counter, forMode: .common)
    worker.loop.perform {
        answers.withLock { $0 += 1 }
        reply.signal()
    }
    waitForAnswers(4)
    wakeUps.withLock { $0 = 0 }

    let posts = 10_000
    let ran = Locked(0)
    for _ in 0..<posts {
        worker.loop.perform {
            let count = ran.withLock { count in
                count += 1
                return count
            }
            if count == posts {
                answers.withLock { $0 += 1 }
                reply.signal()
            }
        }
    }
    say("posted \(posts) blocks in a burst")
    waitForAnswers(5)
    say("all \(ran.current) ran on the worker; they cost it \(wakeUps.current) wake-up(s), not \(posts)")
    counter.invalidate()

    worker.stop()
    say("worker.stop() returned: its loop stopped and its thread was joined")
    reply.invalidate()
}

// MARK: - 6. Stop

/// `run()` on this thread returns when another thread calls `stop()`.
func stopFromAnotherThread() {
    section("6. stop() from another thread ends run()")
    let loop = Loop.current
    let heartbeat = LoopTimer(after: .milliseconds(150), repeating: .milliseconds(150)) { _ in
        say("  main loop alive in run()")
    }
    loop.add(heartbeat, forMode: .default)

    let stopper = LoopThread(name: "demo-stopper")
    let stopTimer = LoopTimer(after: .milliseconds(500)) { _ in
        say("  thread '\(threadName())' calls stop() on the main loop")
        loop.stop()
    }
    stopper.loop.add(stopTimer, forMode: .default)

    say("calling run() (a timer on 'demo-stopper' stops it after 500 ms)")
    loop.run()
    say("run() returned; the main loop's currentMode is now \(loop.currentMode.map { ".\($0.name)" } ?? "nil")")
    say("(a server's main loop normally runs for the life of the process: stopping it is discouraged)")

    heartbeat.invalidate()
    stopper.stop()
}

// MARK: - 7. Dispatch and the main actor

/// `DispatchQueue.main` and `@MainActor` work run on `Loop.main`, in common modes only.
func mainQueue() {
    section("7. DispatchQueue.main and @MainActor run on Loop.main")
    let loop = Loop.main
    let custom = Loop.Mode("custom")
    let keepCustom = LoopSource {}
    loop.add(keepCustom, forMode: custom)

    DispatchQueue.main.async {
        say("  DispatchQueue.main.async block runs on the main loop in .\(Loop.main.currentMode?.name ?? "?")")
    }
    say("run(mode: custom, for: 200 ms): a custom mode outside the common set leaves the main queue waiting")
    let inCustom = loop.run(mode: custom, for: .milliseconds(200))
    say("run returned \(resultName(inCustom)); the block has not run")
    say("run(mode: .default, …): a common mode drains it")
    loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true)

    Task { @MainActor in
        say("  @MainActor task runs on the main loop (Loop.current === Loop.main: \(Loop.current === Loop.main))")
        Loop.main.stop()
    }
    let result = loop.run(mode: .default, for: .seconds(2))
    say("run returned \(resultName(result)): the task stopped it")
    keepCustom.invalidate()
}

// MARK: - 8. Tracing

/// Writes `text` to `path`; returns whether it worked.
func writeFile(_ path: String, _ text: String) -> Bool {
    guard let file = fopen(path, "w") else { return false }
    let written = fputs(text, file) >= 0
    return fclose(file) == 0 && written
}

/// Where `trace.json` and `trace.svg` go: `--trace-dir DIR`, else `.build/demo` when the demo runs
/// from the package root (`.build` exists: `swift run` made it), else nowhere. Never into tracked
/// files: the example trace in `docs/` is refreshed only on purpose, with `--trace-dir docs`.
func traceDirectory() -> String? {
    let arguments = CommandLine.arguments
    if let flag = arguments.firstIndex(of: "--trace-dir"), flag + 1 < arguments.count {
        return arguments[flag + 1]
    }
    var info = stat()
    guard stat(".build", &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return nil }
    mkdir(".build/demo", 0o755)
    return stat(".build/demo", &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR ? ".build/demo" : nil
}

/// Traces about 200 ms of two loops: the main loop runs a 60 fps frame link, a 25 ms timer and an
/// observer; each tick posts work to a `LoopThread`, which answers through a pipe (a descriptor
/// source) and a custom source. One handler stalls for 30 ms: the frame link skips the frames it
/// hides, and the hang monitor reports it.
func tracing() {
    section("8. Tracing two loops; a hang report; frames on a grid")
    let loop = Loop.current
    let worker = LoopThread(name: "demo-trace")
    let tracer = LoopTracer(capacity: 20_000)
    loop.attach(tracer)
    worker.loop.attach(tracer)
    let hangs = Locked<[LoopHangMonitor.Report]>([])
    let monitor = LoopHangMonitor(loop: loop, threshold: .milliseconds(15)) { report in
        hangs.withLock { $0.append(report) }
    }

    // The worker answers through a pipe (a descriptor source on the main loop) and a custom source.
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else {
        say("pipe() failed; skipping")
        return
    }
    let (readEnd, writeEnd) = (ends[0], ends[1])
    let replies = Locked(0)
    let pipeReader = try? LoopDescriptorSource(fileDescriptor: readEnd, events: .readable) { source, _ in
        var bytes = [UInt8](repeating: 0, count: 64)
        _ = read(source.fileDescriptor, &bytes, bytes.count)
    }
    if let pipeReader { loop.add(pipeReader, forMode: .common) }
    let answer = LoopSource { replies.withLock { $0 += 1 } }
    loop.add(answer, forMode: .common)

    // Frames at 60 fps, in .common; jitter = how late each callout is after its frame's grid time.
    var frames: [(timestamp: ContinuousClock.Instant, calledAt: ContinuousClock.Instant)] = []
    let link = FrameLink(
        framesPerSecond: 60,
        loop.isolated { link in
            frames.append((link.timestamp, .now))
        })
    link.add(to: loop, forMode: .common)

    var ticks = 0
    let ticker = LoopTimer(
        after: .milliseconds(25), repeating: .milliseconds(25),
        loop.isolated { _ in
            ticks += 1
            for job in 0..<3 {
                worker.loop.perform {
                    var spin = 0
                    for index in 0..<5_000 { spin &+= index &* job }  // a little work
                    if spin == -1 { say("unreachable") }
                    var byte: UInt8 = 1
                    _ = write(writeEnd, &byte, 1)
                    answer.signal()
                }
            }
        })
    loop.add(ticker, forMode: .default)
    let stall = LoopTimer(after: .milliseconds(110)) { _ in
        usleep(30_000)  // a slow handler: 30 ms without sleeping
    }
    loop.add(stall, forMode: .default)
    var idleCallouts = 0
    let idle = LoopObserver(activities: .beforeWaiting, loop.isolated { _, _ in idleCallouts += 1 })
    loop.add(idle, forMode: .common)

    let start = ContinuousClock.now
    say("tracing: run(mode: .default, for: 160 ms), then run(mode: .tracking, for: 50 ms)")
    loop.run(mode: .default, for: .milliseconds(160))
    loop.run(mode: .tracking, for: .milliseconds(50))
    let elapsed = ContinuousClock.now - start
    loop.detach(tracer)
    worker.loop.detach(tracer)
    monitor.invalidate()
    link.invalidate()
    ticker.invalidate()
    idle.invalidate()
    worker.stop()
    pipeReader?.invalidate()
    answer.invalidate()
    close(readEnd)
    close(writeEnd)

    // Frames: on the grid, one per frame, the ones hidden by the stall skipped.
    let frameDuration = Duration.seconds(1) / 60
    let expected = Int(((elapsed) / frameDuration).rounded(.down))
    var lateness = frames.map { ($0.calledAt - $0.timestamp) / .microseconds(1) }.sorted()
    if lateness.isEmpty { lateness = [0] }
    let skipped = zip(frames, frames.dropFirst()).reduce(0) { total, pair in
        total + Int(((pair.1.timestamp - pair.0.timestamp) / frameDuration).rounded()) - 1
    }
    say(
        "frame link: \(frames.count) callouts in \(Int(elapsed / .milliseconds(1))) ms (≈\(expected) frames); \(skipped) skipped"
    )
    say(
        "  callout lateness after the frame's grid time: median \(Int(lateness[lateness.count / 2])) µs, "
            + "max \(Int(lateness.last!)) µs"
    )
    say("ticker fired \(ticks)x; the worker answered \(replies.current)x; beforeWaiting observer \(idleCallouts)x")
    for report in hangs.current {
        say("hang monitor: \(report)")
    }
    if hangs.current.isEmpty { say("hang monitor: nothing reported (unexpected: a handler stalled 30 ms)") }

    say("tracer: \(tracer.count) events (\(tracer.overwritten) overwritten)")
    guard let directory = traceDirectory() else {
        say("not writing trace files: run from the package root or pass --trace-dir DIR")
        return
    }
    let json = writeFile("\(directory)/trace.json", tracer.chromeTraceJSON())
    let svg = writeFile("\(directory)/trace.svg", tracer.svgTimeline(width: 1200))
    say("wrote \(directory)/trace.json (open in https://ui.perfetto.dev): \(json ? "ok" : "failed")")
    say("wrote \(directory)/trace.svg: \(svg ? "ok" : "failed")")
}

// MARK: - Main

_ = Clock.start
emit("RunLoopKit demo: an Apple-style run loop on libevent (times are ms since start)")
phases()
idle()
modes()
tolerance()
backgroundThread()
stopFromAnotherThread()
mainQueue()
tracing()
emit("")
say("done")
