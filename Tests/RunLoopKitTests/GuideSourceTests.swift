import Glibc
import RunLoopKit
import Testing

// Code samples of the DocC article SourcesAndPorts.md
// (Sources/RunLoopKit/RunLoopKit.docc/SourcesAndPorts.md), run: these blocks appear here verbatim
// (indentation aside); DocumentationTests.swift holds its others. The blocks of LoopsAndModes.md on
// loop threads and groups are here too. Tests of the same calls that the article no longer shows
// stay beside them. scripts/check-doc-snippets.py, run by `make docs`, fails when a block of the
// article is in none of the files its table names for it.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// A stand-in for the handling of an inbox's messages.
private func handle(_ messages: [String]) { print("handling \(messages)") }

/// A stand-in for the retried work.
private func reconnect() { print("reconnecting") }

/// Stand-ins for a server's shutdown.
private func stopAccepting() { print("stop accepting") }
private func finishInFlightResponses(_ done: () -> Void) {
    print("finish the responses in flight")
    done()
}

/// Which loops `startListening(on:)` ran on, and whether each was the one it was given.
private let listening = Recorder<Bool>()

/// A stand-in for opening a server's listener on `loop`.
private func startListening(on loop: Loop) { listening.append(Loop.current === loop) }

// MARK: Custom sources, blocks

private func customSource() -> Loop.RunResult {
    let message = "hello"
    let inbox = MessageQueue()  // your own thread-safe queue
    let source = LoopSource { handle(inbox.drain()) }  // runs on the loop thread
    Loop.current.add(source, forMode: .default)

    // From any thread:
    inbox.push(message)
    source.signal()  // the loop wakes and performs the source once

    let result = Loop.current.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
    // .handledSource as soon as the source has been performed
    source.invalidate()
    return result
}

private func blocksFromAnyThread() -> (cancelled: Bool, spinLimit: Duration) {
    let worker = LoopThread(name: "worker")
    worker.loop.perform {
        print("runs on the worker thread")
    }
    worker.loop.perform(inModes: [.default]) {
        print("runs only when the worker runs .default")
    }

    let retry = worker.loop.schedule(after: .seconds(2)) {
        reconnect()
    }
    // ... the connection came back first:
    retry.cancel()

    worker.loop.spinLimit = .microseconds(20)  // poll at most 20 µs before each sleep (default 50 µs)
    worker.loop.spinLimit = .zero  // never spin: always sleep in the kernel at once
    let spinLimit = worker.loop.spinLimit
    worker.stop()
    return (retry.isCancelled, spinLimit)
}

// MARK: Background threads

private func backgroundThread() {
    let background = LoopThread(name: "com.app.bg")  // the thread starts and runs its loop

    // Work from any thread:
    background.loop.perform { print("on the background thread") }

    // Timers and sources run there too:
    let poll = LoopTimer(after: .seconds(1), repeating: .seconds(1)) { _ in print("polling") }
    background.loop.add(poll, forMode: .default)

    // ...
    _ = waitUntil { printed.events.contains("polling") }
    background.shutdown()  // ends the loop for good and joins the thread
}

/// A worker started while the process has no descriptor left, then once it has them back.
private func startingAWorkerOutOfDescriptors() -> (outOfDescriptors: LoopThread?, afterwards: LoopThread?) {
    /// A worker thread, or nil when the process has no descriptors left for its loop.
    func startWorker() -> LoopThread? {
        do {
            return try LoopThread.start(name: "worker")
        } catch {
            // EMFILE or ENFILE: nothing was left open; try again once descriptors are free.
            print("no worker: \(error.message)")
            return nil
        }
    }
    let fillers = exhaustDescriptors()
    let none = startWorker()
    for filler in fillers { close(filler) }
    return (none, startWorker())
}

private func waitingForABackgroundJob() {
    let loop = Loop.current
    let worker = LoopThread(name: "worker")
    let done = LoopSource { print("the job is done") }
    loop.add(done, forMode: .default)
    worker.loop.perform {
        print("the job runs on the worker thread")
        done.signal()
    }
    loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: true)  // .handledSource
    worker.shutdown()
    done.invalidate()
}

// MARK: Descriptors, ports, signals, groups

/// What the descriptor source's peer saw, and how the loop's last run ended.
private struct DescriptorOutcome: Sendable {
    var response: [UInt8] = []
    var lastRun: Loop.RunResult?
    var sourceValid = true
}

/// A request and its response over a socket pair, served by the Guide's descriptor source.
private func descriptorSource() throws -> DescriptorOutcome {
    var outcome = DescriptorOutcome()
    var pair: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { return outcome }
    let (socket, peer) = (pair[0], pair[1])
    var buffer = [UInt8](repeating: 0, count: 64)
    var output: [UInt8] = []
    var flushed = false
    func queueResponse() { output += Array("pong".utf8) }
    func flushOutput() -> Bool {
        let written = write(socket, output, output.count)
        if written > 0 { output.removeFirst(written) }
        flushed = output.isEmpty
        return output.isEmpty
    }

    let loop = Loop.current
    let connection = try LoopDescriptorSource(
        fileDescriptor: socket, events: .readable,
        loop.isolated { source, ready in
            if ready.contains(.readable) {
                let count = read(source.fileDescriptor, &buffer, buffer.count)
                if count == 0 {  // the peer closed
                    source.invalidate()  // off epoll now (on the loop thread)...
                    close(source.fileDescriptor)  // ...so the descriptor may be closed right after
                    return
                }
                queueResponse()
                source.events = [.readable, .writable]  // wake when the socket can take the output
            }
            if ready.contains(.writable) && flushOutput() {
                source.events = .readable  // all written: stop asking
            }
        })
    loop.add(connection, forMode: .default)

    _ = write(peer, "ping", 4)
    runLoop(loop, in: .default) { flushed }
    var response = [UInt8](repeating: 0, count: 16)
    let count = read(peer, &response, response.count)
    outcome.response = Array(response.prefix(max(count, 0)))
    // The peer closes: the source reads the end of file and goes, which leaves .default empty.
    close(peer)
    outcome.lastRun = loop.run(mode: .default, for: .seconds(5))
    outcome.sourceValid = connection.isValid
    return outcome
}

private func messagePort() {
    let worker = LoopThread(name: "worker")
    enum Command: Sendable { case reload, flush }
    let commands = LoopPort<Command> { command in
        print("handling \(command) on the loop thread")
    }
    worker.loop.add(commands, forMode: .default)
    commands.send(.reload)  // from any thread
    commands.send(contentsOf: [.flush, .reload])  // many at once: one lock, one wake-up
    _ = waitUntil { printed.count == 3 }
    worker.stop()
}

private func terminateSignal() -> Loop.RunResult {
    let loop = Loop.current
    let terminate = LoopSignalSource(signal: SIGTERM) { _ in
        stopAccepting()
        finishInFlightResponses { loop.stop() }
    }
    loop.add(terminate, forMode: .default)

    raise(SIGTERM)
    let result = loop.run(mode: .default, for: .seconds(10))
    terminate.invalidate()  // SIGTERM's action before the source is restored
    return result
}

private func loopGroup() {
    let group = LoopGroup(threads: 4, name: "http")
    for loop in group.loops {
        loop.perform { startListening(on: loop) }  // e.g. one SO_REUSEPORT listener per loop
    }
    // ...
    group.shutdown()
}

// MARK: Tests

/// The chapters' code does what the chapters say. Serialized: the snippets share `printed`.
@Suite(.serialized) struct GuideSourceTests {
    init() { printed.removeAll() }

    @Test func aSignalledSourceDrainsTheInbox() async {
        #expect(await awaitFreshThread { customSource() } == .handledSource)
        #expect(printed.events == [#"handling ["hello"]"#])
    }

    @Test func blocksRunInOrderAndACancelledOneNever() async {
        let (cancelled, spinLimit) = await awaitFreshThread { blocksFromAnyThread() }
        #expect(printed.events == ["runs on the worker thread", "runs only when the worker runs .default"])
        #expect(cancelled)
        #expect(spinLimit == .zero)
    }

    @Test func aBackgroundThreadRunsBlocksAndTimers() async {
        await awaitFreshThread { backgroundThread() }
        #expect(printed.events == ["on the background thread", "polling"])
    }

    /// "When descriptors run out", in a child process whose descriptor table is full.
    @Test func aWorkerThatCannotStartIsNilAndSaysWhy() async {
        await #expect(processExitsWith: .success) {
            let (none, worker) = startingAWorkerOutOfDescriptors()
            guard none == nil, let worker else { childFailure("started: \(none != nil), then \(worker != nil)") }
            worker.stop()
            guard printed.events == ["no worker: eventfd failed: Too many open files (errno 24)"] else {
                childFailure("printed \(printed.events)")
            }
            exit(0)
        }
    }

    @Test func aSourceSaysWhenTheBackgroundJobIsDone() async {
        await awaitFreshThread { waitingForABackgroundJob() }
        #expect(printed.events == ["the job runs on the worker thread", "the job is done"])
    }

    @Test func aDescriptorSourceServesASocket() async throws {
        let outcome = try await awaitFreshThread { Result { try descriptorSource() } }.get()
        #expect(outcome.response == Array("pong".utf8))
        #expect(outcome.lastRun == .finished)
        #expect(!outcome.sourceValid)
    }

    @Test func aPortDeliversOnTheWorkerThread() async {
        await awaitFreshThread { messagePort() }
        #expect(
            printed.events == [
                "handling reload on the loop thread", "handling flush on the loop thread",
                "handling reload on the loop thread",
            ])
    }

    @Test func sigtermStopsTheLoopAfterTheShutdownWork() async {
        #expect(await awaitFreshThread { terminateSignal() } == .stopped)
        #expect(printed.events == ["stop accepting", "finish the responses in flight"])
    }

    @Test func aGroupRunsABlockOnEachOfItsLoops() async {
        listening.removeAll()
        await awaitFreshThread { loopGroup() }
        #expect(listening.events == [true, true, true, true])
    }
}
