import Dispatch
import Glibc
import RunLoopKit
import Testing

// The code of the articles in Sources/RunLoopKit/RunLoopKit.docc, run. Every ```swift block of
// an article appears here verbatim (indentation aside), each in a function of its own;
// scripts/check-doc-snippets.py, run by `make docs`, fails when an article's code is missing here,
// so a snippet that stops compiling or behaving as its article says fails a test.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// A stand-in for a blocking call of the work-off-the-loop article.
private func loadTemplate(named name: String) throws -> String { "<\(name)>" }

// MARK: Loops and modes

private func runningALoop() -> Loop.RunResult {
    let loop = Loop.current
    let timer = LoopTimer(after: .milliseconds(10)) { _ in print("tick") }
    loop.add(timer, forMode: .default)
    let result = loop.run(mode: .default, for: .seconds(1))
    // prints "tick"; result is .finished: the one-shot timer fired
    // and left .default empty
    return result
}

private func observingPhases() {
    let loop = Loop.current
    let observer = LoopObserver(activities: [.entry, .exit]) { _, activity in
        print("\(activity) in \(loop.currentMode?.name ?? "no mode")")
    }
    loop.add(observer, forMode: .common)
    loop.add(LoopTimer(after: .milliseconds(5)) { _ in }, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    // prints "entry in default", then "exit in default"
    observer.invalidate()
}

private func commonModes() -> [LoopTimer] {
    let loop = Loop.current
    let frozen = LoopTimer(
        after: .milliseconds(10), repeating: .milliseconds(10)
    ) { _ in
        print("default-mode tick")
    }
    loop.add(frozen, forMode: .default)
    let ticking = LoopTimer(
        after: .milliseconds(10), repeating: .milliseconds(10)
    ) { _ in
        print("common-mode tick")
    }
    loop.add(ticking, forMode: .common)
    loop.run(mode: .tracking, for: .milliseconds(100))
    // only "common-mode tick"
    return [frozen, ticking]
}

private func customCommonMode() {
    let loop = Loop.current
    let importing = Loop.Mode("import")
    loop.addCommonMode(importing)
    let heartbeat = LoopTimer(after: .milliseconds(10)) { _ in
        print("heartbeat")
    }
    loop.add(heartbeat, forMode: .common)
    // Serves the .common items, not the .default-only ones:
    loop.run(mode: importing, for: .seconds(1))
}

private func waitingForAWorker() -> Loop.RunResult {
    let loop = Loop.current
    let worker = LoopThread(name: "worker")
    let done = LoopSource { print("back on this thread") }
    loop.add(done, forMode: .default)
    worker.loop.perform {
        print("on the worker thread")
        done.signal()
    }
    let result = loop.run(
        mode: .default, for: .seconds(10), returnAfterSourceHandled: true)
    // Runs the blocks already posted, stops the loop, joins the thread:
    worker.stop()
    // result is .handledSource
    done.invalidate()
    return result
}

private func nestedRun() {
    let loop = Loop.current
    let modal = Loop.Mode("modal")
    var answered = false
    let answer = LoopTimer(after: .milliseconds(30), loop.isolated { _ in answered = true })
    loop.add(answer, forMode: modal)
    let ask = LoopTimer(
        after: .milliseconds(10),
        loop.isolated { _ in
            while !answered {
                // Serves only the modal mode:
                loop.run(mode: modal, for: .seconds(1))
            }
            print("answered; back in \(loop.currentMode!.name)")
        })
    loop.add(ask, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    // prints "answered; back in default"
}

// MARK: Timers

private func repeatingAndOneShot() -> (ticks: Int, valid: Bool) {
    let loop = Loop.current
    var ticks = 0
    let every = LoopTimer(
        after: .milliseconds(10), repeating: .milliseconds(10),
        loop.isolated { timer in
            ticks += 1
            if ticks == 3 { timer.invalidate() }  // from inside its own handler
        })
    loop.add(every, forMode: .common)
    let once = LoopTimer(after: .milliseconds(20)) { _ in
        print("one-shot, then invalid")
    }
    loop.add(once, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    // ticks is 3; .default became empty, so the run returned .finished
    return (ticks, once.isValid)
}

private func tolerance() -> Duration {
    let start = ContinuousClock.now
    let loop = Loop.current
    let a = LoopTimer(
        after: .milliseconds(50), tolerance: .milliseconds(30)
    ) { _ in print("a") }
    let b = LoopTimer(after: .milliseconds(70)) { _ in print("b") }
    loop.add(a, forMode: .default)
    loop.add(b, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    // one wake-up at about 70 ms: "a", then "b"
    return ContinuousClock.now - start
}

private func burst() -> [ContinuousClock.Instant] {
    let loop = Loop.current
    var fireDates: [ContinuousClock.Instant] = []
    let sampler = LoopTimer(
        after: .milliseconds(20), repeating: .milliseconds(20), missedFirePolicy: .burst,
        loop.isolated { timer in
            fireDates.append(timer.fireDate)
            if fireDates.count == 5 { loop.stop() }
        })
    loop.add(sampler, forMode: .default)
    // Busy elsewhere: the fires due at 20, 40, 60, 80 and 100 ms are missed.
    usleep(110_000)
    // One callout for each of them, back to back, each with the date it is for:
    loop.run(mode: .default, for: .seconds(1))
    sampler.invalidate()
    // fireDates are 20 ms apart: 20, 40, 60, 80 and 100 ms after the timer was made
    return fireDates
}

private func scheduleAndCancel() -> Bool {
    let worker = LoopThread(name: "retries")
    let retry = worker.loop.schedule(after: .seconds(2)) {
        print("reconnecting")
    }
    // ... the connection came back first:
    retry.cancel()
    worker.stop()
    // retry.isCancelled is true: the block never runs
    return retry.isCancelled
}

private func frameLink() -> (frames: Int, elapsed: Duration, result: Loop.RunResult) {
    let start = ContinuousClock.now
    let loop = Loop.current
    var frames = 0
    let link = FrameLink(
        framesPerSecond: 120,
        loop.isolated { link in
            // link.timestamp: this frame's time on the grid;
            // link.targetTimestamp: the next frame's.
            frames += 1
            if frames == 12 { link.invalidate() }
        })
    // .common: keeps running while the loop runs .tracking
    link.add(to: loop, forMode: .common)
    let result = loop.run(mode: .default, for: .seconds(1))
    // about 100 ms later: frames is 12, and the run returned .finished
    return (frames, ContinuousClock.now - start, result)
}

// MARK: Sources and ports

private func performFromAnyThread() {
    let worker = LoopThread(name: "worker")
    worker.loop.perform {
        print("runs on the worker thread")
    }
    worker.loop.perform(inModes: [.default]) {
        print("runs only when the worker runs .default")
    }
    worker.stop()  // the blocks already posted run first
}

private func customSource() -> Loop.RunResult {
    let loop = Loop.current
    let inbox = MessageQueue()  // your own thread-safe queue
    let source = LoopSource { print("drained \(inbox.drain())") }
    loop.add(source, forMode: .default)

    // From any thread:
    inbox.push("hello")
    source.signal()  // wakes the loop, which performs the source once

    let result = loop.run(
        mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
    // prints "drained ["hello"]"; result is .handledSource
    source.invalidate()
    return result
}

private func messagePort() {
    enum Command: Sendable { case reload, flush }
    let loop = Loop.current
    let commands = LoopPort<Command> { command in
        print("handling \(command) on the loop thread")
    }
    loop.add(commands, forMode: .default)
    commands.send(.reload)  // from any thread
    commands.send(.flush)
    loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
    // prints "handling reload on the loop thread",
    // then "handling flush on the loop thread"
    commands.invalidate()
}

private func descriptorSource() throws -> Loop.RunResult {
    let loop = Loop.current
    var fds: [Int32] = [0, 0]
    _ = fds.withUnsafeMutableBufferPointer { pipe($0.baseAddress!) }
    let reader = try LoopDescriptorSource(
        fileDescriptor: fds[0], events: .readable
    ) { source, ready in
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(source.fileDescriptor, &buffer, buffer.count)
        if count <= 0 {  // the writer closed
            source.invalidate()  // off epoll now...
            // ...so the descriptor may be closed right after:
            close(source.fileDescriptor)
            return
        }
        print("read \(count) bytes")
    }
    loop.add(reader, forMode: .default)
    _ = write(fds[1], "ping", 4)
    close(fds[1])
    loop.run(mode: .default, for: .seconds(5))
    // prints "read 4 bytes"; then the end of file invalidates the source
    // and the run finishes
    return loop.run(mode: .default, for: .zero)
}

private func signalSource() {
    let loop = Loop.current
    let hangUp = LoopSignalSource(signal: SIGHUP) { signal in
        print("signal \(signal): reloading")
    }
    loop.add(hangUp, forMode: .default)
    raise(SIGHUP)
    loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
    // prints "signal 1: reloading"
    hangUp.invalidate()  // the action the process had before is restored
}

// MARK: Work off the loop

private func workPool() -> LoopWorkPool {
    let disk = LoopWorkPool(name: "disk", threads: 2)
    let loop = Loop.current
    let load = { @Sendable in try loadTemplate(named: "index") }
    disk.run(load, completingOn: loop, inModes: [.default]) { result in
        switch result {  // on the loop's thread, when it runs .default
        case .success(let template): print("rendering \(template)")
        case .failure(let error): print("no template: \(error)")
        }
    }
    return disk
}

private func workPoolAsync() async throws -> String {
    let disk = LoopWorkPool(name: "disk", threads: 2)
    let template = try await disk.run { try loadTemplate(named: "index") }
    return template
}

private func poolSaturation(_ disk: LoopWorkPool) {
    let m = disk.metrics
    if m.queued > 0 && m.running == disk.threadCount {
        let delay = m.averageQueueDelay ?? .zero
        print("disk pool saturated: \(m.queued) waiting, delay \(delay)")
    }
}

private func childProcess() throws {
    let loop = Loop.current
    let child = try LoopProcess(
        executable: "/bin/sh", arguments: ["-c", "exit 3"],
        standardInput: .null)
    child.onExit { process, status in
        print("sh \(process.pid): \(status)")  // exited(3)
    }
    loop.add(child, forMode: .common)
    loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: true)
}

private func supervisor() -> Int {
    let loop = Loop.current
    let failing = ["-c", "exit 1"]  // a child that fails at once
    let starts = LoopBound(0, on: loop)  // the loop thread's count, for the handlers below
    func start() {
        let child: LoopProcess
        do {
            child = try LoopProcess(executable: "/bin/sh", arguments: failing)
        } catch {
            return  // error.systemError: ENOENT, EACCES, …
        }
        starts.value += 1
        child.onExit { _, status in
            guard status != .exited(0), starts.value < 3 else { return }
            // 10 ms, 20 ms, …
            let delay = Duration.milliseconds(10) * (1 << (starts.value - 1))
            loop.add(LoopTimer(after: delay) { _ in start() }, forMode: .common)
        }
        loop.add(child, forMode: .common)
    }
    start()
    loop.run(mode: .default, for: .seconds(10))
    // starts.value is 3: the child failed twice and was restarted twice;
    // then .default became empty
    return starts.value
}

// MARK: Concurrency

actor Connection {
    let loop: Loop
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        loop.asUnownedSerialExecutor()
    }
    init(loop: Loop) { self.loop = loop }
    func handle(_ bytes: [UInt8]) -> Bool {
        Loop.current === loop  // true: on the loop's thread
    }
}

@globalActor
actor IOActor {
    static let thread = LoopThread(name: "io-actor")
    static let shared = IOActor()
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        Self.thread.loop.asUnownedSerialExecutor()
    }
}

@IOActor final class Session {
    func poll() -> Bool {
        // Always on the "io-actor" thread:
        Loop.current === IOActor.thread.loop
    }
}

private func perConnectionState() throws -> (LoopThread, LoopListener) {
    let uploads = LoopThread(name: "uploads")
    let address = try SocketAddress(ipv4: "127.0.0.1", port: 0)
    let listener = try LoopListener(address: address) { connection in
        var received = 0  // this connection's own: moved into its handler
        connection.onRead { connection, buffer in
            received += buffer.count
            buffer.consume(buffer.count)
            // A quota per connection:
            if received > 1 << 20 { connection.abort() }
        }
    }
    uploads.loop.add(listener, forMode: .common)
    return (uploads, listener)
}

private func sharedState(
    _ uploads: LoopThread, address: SocketAddress
) async throws -> (LoopListener, LoopBound<Int>, Int) {
    let connected = LoopBound(0, on: uploads.loop)  // open connections
    let counted = try LoopListener(address: address) { connection in
        connected.value += 1
        connection.onEvent { _, event in
            if case .closed = event { connected.value -= 1 }
        }
    }
    uploads.loop.add(counted, forMode: .common)
    // From any other thread, or task:
    let count = try await uploads.loop.submit { connected.value }
    return (counted, connected, count)
}

private func isolatedHandler() -> [String] {
    let loop = Loop.current
    var lines: [String] = []
    let port = LoopPort<String>(loop.isolated { line in lines.append(line) })
    loop.add(port, forMode: .default)
    port.send("first")  // from any thread
    port.send("second")
    while lines.count < 2 {
        loop.run(
            mode: .default, for: .seconds(1), returnAfterSourceHandled: true)
    }
    // lines is ["first", "second"]
    port.invalidate()
    return lines
}

private func actorOnALoop() async -> Bool {
    let io = LoopThread(name: "io")
    let connection = Connection(loop: io.loop)
    let onTheLoop = await connection.handle([1, 2, 3])  // true
    io.stop()
    return onTheLoop
}

private func taskPreferenceAndSubmit() async throws -> (Bool, Int) {
    let io = LoopThread(name: "io")
    let here = await Task(executorPreference: io.loop) {
        Loop.current === io.loop  // true
    }.value
    // Computed on the loop's thread:
    let answer = try await io.loop.submit { 6 * 7 }
    io.stop()
    return (here, answer)
}

private func assumeIsolated() {
    let io = LoopThread(name: "io")
    let connection = Connection(loop: io.loop)
    io.loop.perform {
        // Fine: this is the loop's thread.
        let handled = connection.assumeIsolated { $0.handle([]) }
        print("handled: \(handled)")
    }
    io.stop()
}

// MARK: Visibility

private func metrics() -> LoopMetrics {
    let loop = Loop.current
    loop.collectsMetrics = true  // any thread; starts from zero
    for _ in 0..<100 { loop.perform {} }
    // Runs the blocks; then .default is empty:
    loop.run(mode: .default, for: .seconds(1))
    let metrics = loop.metrics
    print("iterations: \(metrics.iterations)")
    print("blocks: \(metrics.callouts[.block] ?? 0)")
    print("busy \(metrics.busyTime), asleep \(metrics.waitingTime)")
    if let p99 = metrics.queueDelayQuantile(0.99) {
        print("99% of the posted blocks waited less than \(p99)")
    }
    return metrics
}

private func hangMonitor() {
    let loop = Loop.current
    let monitor = LoopHangMonitor(
        loop: loop, threshold: .milliseconds(50)
    ) { report in
        print("hang: \(report)")
    }
    let stall = LoopTimer(after: .milliseconds(5)) { _ in usleep(80_000) }
    loop.add(stall, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    // prints "hang: 80.2 ms without sleeping in mode default; …;
    // slowest callout: a timer, 80.1 ms"
    monitor.invalidate()
}

private func tracer() -> (json: String, svg: String) {
    let tracer = LoopTracer(capacity: 20_000)
    let loop = Loop.current
    loop.attach(tracer)  // one lane per loop, labelled with its thread
    loop.add(LoopTimer(after: .milliseconds(5)) { _ in }, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    loop.detach(tracer)
    let json = tracer.chromeTraceJSON()  // save as trace.json, open in Perfetto
    // Save as trace.svg, open in a browser:
    let svg = tracer.svgTimeline(width: 1200)
    print("\(tracer.count) events")
    print("\(json.utf8.count) bytes of JSON, \(svg.utf8.count) of SVG")
    return (json, svg)
}

final class SlowCalloutLog: LoopInstrument, @unchecked Sendable {
    // Touched only on the loop's thread, where every hook runs.
    private var started: ContinuousClock.Instant?

    func loopWillCallOut(
        _ loop: Loop, _ kind: LoopCalloutKind,
        at time: ContinuousClock.Instant
    ) {
        started = time
    }

    func loopDidCallOut(
        _ loop: Loop, _ kind: LoopCalloutKind,
        at time: ContinuousClock.Instant
    ) {
        if let started, time - started > .milliseconds(10) {
            print("slow \(kind) callout")
        }
    }
}

private func ownInstrument() {
    let loop = Loop.current
    let log = SlowCalloutLog()
    loop.attach(log)  // from the loop's next iteration
    let slow = LoopTimer(after: .milliseconds(5)) { _ in usleep(20_000) }
    loop.add(slow, forMode: .default)
    loop.run(mode: .default, for: .seconds(1))
    loop.detach(log)
    // prints "slow timer callout"
}

// MARK: Tests

/// The articles' code does what the articles say. Serialized: the snippets share `printed`.
@Suite(.serialized) struct DocumentationTests {
    init() { printed.removeAll() }

    @Test func loopsAndModes() {
        #expect(onFreshThread { runningALoop() } == .finished)
        #expect(printed.events == ["tick"])

        printed.removeAll()
        onFreshThread { observingPhases() }
        #expect(printed.events == ["entry in default", "exit in default"])

        printed.removeAll()
        onFreshThread {
            for timer in commonModes() { timer.invalidate() }
        }
        #expect(printed.events.contains("common-mode tick"))
        #expect(!printed.events.contains("default-mode tick"))

        printed.removeAll()
        onFreshThread { customCommonMode() }
        #expect(printed.events == ["heartbeat"])

        printed.removeAll()
        #expect(onFreshThread { waitingForAWorker() } == .handledSource)
        #expect(printed.events == ["on the worker thread", "back on this thread"])

        printed.removeAll()
        onFreshThread { nestedRun() }
        #expect(printed.events == ["answered; back in default"])
    }

    @Test func timers() {
        let (ticks, onceValid) = onFreshThread { repeatingAndOneShot() }
        #expect(ticks == 3)
        #expect(!onceValid)
        #expect(printed.events == ["one-shot, then invalid"])

        printed.removeAll()
        let elapsed = onFreshThread { tolerance() }
        #expect(printed.events == ["a", "b"])
        #expect(elapsed >= .milliseconds(70))

        // Under `.burst` the five callouts are for five consecutive fire dates, however late
        // a loaded machine runs them; `.keepPhase` would skip from the first missed date to
        // the first one after the sleep, and `.delay` would move the phase.
        let fireDates = onFreshThread { burst() }
        #expect(fireDates.count == 5)
        let gaps = zip(fireDates, fireDates.dropFirst()).map { $1 - $0 }
        #expect(gaps == Array(repeating: .milliseconds(20), count: 4), "\(gaps)")

        printed.removeAll()
        #expect(scheduleAndCancel())
        #expect(printed.events.isEmpty)

        let (frames, frameTime, result) = onFreshThread { frameLink() }
        #expect(frames == 12)
        #expect(frameTime >= .milliseconds(90))
        #expect(result == .finished)
    }

    @Test func sourcesAndPorts() throws {
        performFromAnyThread()
        #expect(printed.events == ["runs on the worker thread", "runs only when the worker runs .default"])

        printed.removeAll()
        #expect(onFreshThread { customSource() } == .handledSource)
        #expect(printed.events == [#"drained ["hello"]"#])

        printed.removeAll()
        onFreshThread { messagePort() }
        #expect(printed.events == ["handling reload on the loop thread", "handling flush on the loop thread"])

        printed.removeAll()
        let afterEndOfFile = try onFreshThread { Result { try descriptorSource() } }.get()
        #expect(printed.events == ["read 4 bytes"])
        #expect(afterEndOfFile == .finished)

        printed.removeAll()
        onFreshThread { signalSource() }
        #expect(printed.events == ["signal \(SIGHUP): reloading"])
    }

    @Test func workOffTheLoop() async throws {
        onFreshThread {
            let disk = workPool()
            runLoop(Loop.current, in: .default) { printed.count == 1 }
            poolSaturation(disk)
            disk.shutdown()
        }
        #expect(printed.events == ["rendering <index>"])

        #expect(try await workPoolAsync() == "<index>")

        printed.removeAll()
        try onFreshThread { Result { try childProcess() } }.get()
        #expect(printed.events.count == 1)
        #expect(printed.events.first?.hasSuffix(": exited(3)") == true)

        #expect(onFreshThread { supervisor() } == 3)
    }

    /// The handler rules' three idioms: state moved into a handler, a `LoopBound` shared by
    /// handlers and read through `submit`, a handler isolated to the calling thread's loop.
    @Test func handlerRules() async throws {
        let (uploads, listener) = try perConnectionState()
        defer { uploads.shutdown() }
        // Python's client: a small upload ends in an orderly close, one over the quota in a reset.
        let (output, _) = try runPython(
            """
            import errno, socket, sys
            port = int(sys.argv[1])
            small = socket.create_connection(("127.0.0.1", port))
            small.sendall(b"x" * 1000)
            small.shutdown(socket.SHUT_WR)
            small.settimeout(20)
            print("small:", "closed" if small.recv(1) == b"" else "data")
            large = socket.create_connection(("127.0.0.1", port))
            large.settimeout(20)
            try:
                large.sendall(b"x" * (4 << 20))
                large.shutdown(socket.SHUT_WR)
                print("large:", "closed" if large.recv(1) == b"" else "data")
            except (ConnectionResetError, BrokenPipeError):
                print("large: reset")
            except OSError as error:
                # A reset that lands between the last send and the shutdown.
                print("large: reset" if error.errno == errno.ENOTCONN else f"large: {error!r}")
            """, [String(listener.localAddress.port!)])
        #expect(output == "small: closed\nlarge: reset\n")

        let (counted, connected, count) = try await sharedState(
            uploads, address: SocketAddress(ipv4: "127.0.0.1", port: 0))
        #expect(count == 0)
        let client = LoopThread(name: "counted-clients")
        defer { client.shutdown() }
        var connections: [LoopConnection] = []
        for _ in 0..<3 {
            connections.append(try await LoopConnection.connect(to: counted.localAddress, on: client.loop))
        }
        /// Whether the count read on the loop becomes `expected` within 10 s.
        func openCount(becomes expected: Int) async -> Bool {
            let deadline = ContinuousClock.now + .seconds(10)
            while (try? await uploads.loop.submit { connected.value }) != expected {
                guard ContinuousClock.now < deadline else { return false }
                try? await Task.sleep(for: .milliseconds(2))
            }
            return true
        }
        #expect(await openCount(becomes: 3))
        connections[0].close()
        #expect(await openCount(becomes: 2))
        for connection in connections.dropFirst() { connection.close() }

        #expect(await awaitFreshThread { isolatedHandler() } == ["first", "second"])
    }

    @Test func concurrency() async throws {
        #expect(await actorOnALoop())
        let (here, answer) = try await taskPreferenceAndSubmit()
        #expect(here)
        #expect(answer == 42)
        #expect(await Session().poll())

        assumeIsolated()
        #expect(printed.events == ["handled: true"])
    }

    @Test func visibility() {
        let snapshot = onFreshThread { metrics() }
        #expect(snapshot.callouts[.block] == 100)
        #expect(snapshot.queueDelayCount == 100)
        #expect(printed.events.first == "iterations: \(snapshot.iterations)")
        #expect(printed.events.dropFirst().first == "blocks: 100")
        #expect(printed.events.count == 4)

        printed.removeAll()
        onFreshThread { hangMonitor() }
        #expect(printed.events.count == 1)
        #expect(printed.events.first?.hasPrefix("hang: ") == true)
        #expect(printed.events.first?.hasSuffix("ms") == true)
        #expect(printed.events.first?.contains("slowest callout: a timer") == true)

        printed.removeAll()
        let (json, svg) = onFreshThread { tracer() }
        #expect(json.contains("\"timer\""))
        #expect(svg.contains("<svg"))
        #expect(printed.events.count == 2)
        #expect(printed.events.last == "\(json.utf8.count) bytes of JSON, \(svg.utf8.count) of SVG")

        printed.removeAll()
        onFreshThread { ownInstrument() }
        #expect(printed.events == ["slow timer callout"])
    }
}
