import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// A loop that has ended (its thread exited, its `LoopThread` was stopped, its `LoopGroup` shut
/// down) refuses work clearly, and nothing waits forever on it.
@Suite struct EndedLoopTests {
    /// The three ways a loop ends.
    enum Ending: String, CaseIterable, Sendable {
        case threadExited, loopThreadStopped, groupShutDown

        func makeEndedLoop() -> Loop {
            switch self {
            case .threadExited:
                // Joined: the thread's loop is torn down by the time this returns.
                let loop = Locked<Loop?>(nil)
                runOnJoinedThread { loop.withLock { $0 = Loop.current } }
                return loop.withLock { $0! }
            case .loopThreadStopped:
                return endedLoop()
            case .groupShutDown:
                let group = LoopGroup(threads: 2, name: "ended-group")
                group.shutdown()
                return group.loops[1]
            }
        }
    }

    @Test(arguments: Ending.allCases)
    func performReturnsFalseAndReleasesTheBlockUnrun(_ ending: Ending) {
        let loop = ending.makeEndedLoop()
        #expect(loop.hasEnded)
        let counter = DeinitCounter()
        let ran = Recorder<Bool>()
        var accepted = true
        do {
            let tracked = counter.make()
            accepted = loop.perform {
                tracked.touch()
                ran.append(true)
            }
        }
        let acceptedInModes = loop.perform(inModes: [.default, .tracking]) { ran.append(true) }
        #expect(!accepted)
        #expect(!acceptedInModes)
        #expect(counter.value == 1, "the refused block should be released at once")
        #expect(ran.count == 0)
    }

    @Test func aLiveLoopAcceptsBlocks() {
        let thread = LoopThread(name: "live")
        defer { thread.stop() }
        #expect(!thread.loop.hasEnded)
        let done = DispatchSemaphore(value: 0)
        #expect(thread.loop.perform { done.signal() })
        #expect(done.wait(timeout: .now() + 5) == .success)
    }

    @Test(arguments: Ending.allCases)
    func submitThrowsThatTheLoopHasEnded(_ ending: Ending) async {
        let loop = ending.makeEndedLoop()
        await #expect(throws: LoopError.loopEnded) {
            try await loop.submit { 42 }
        }
    }

    /// Submits racing with the stop: each one returns its value or throws, none is left waiting.
    @Test func submitsRacingWithStopAllComplete() async {
        for _ in 0..<20 {
            let thread = LoopThread(name: "racing")
            let loop = thread.loop
            let outcomes = await withTaskGroup(of: Bool?.self) { group in
                for value in 0..<50 {
                    group.addTask {
                        do {
                            return try await loop.submit { value } == value
                        } catch let error as LoopError {
                            return error == .loopEnded ? nil : false
                        } catch {
                            return false
                        }
                    }
                }
                group.addTask {
                    thread.stop()
                    return nil
                }
                var outcomes: [Bool?] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes.count == 51)
            #expect(!outcomes.contains(false))
        }
    }

    /// An actor bound to a loop that has ended still answers: its jobs run on the calling thread,
    /// one at a time, isolated to the loop's executor.
    @Test func anActorOfAnEndedLoopStillAnswersSerially() async {
        let counter = LoopBoundCounter(loop: endedLoop())
        await withTaskGroup(of: Void.self) { group in
            for value in 0..<200 {
                group.addTask { _ = await counter.append(value) }
            }
        }
        let values = await counter.values
        #expect(values.count == 200)
        #expect(Set(values) == Set(0..<200))
    }

    @Test func codeIsolatedToAnEndedLoopPassesItsIsolationCheck() async {
        let counter = LoopBoundCounter(loop: endedLoop())
        let isolated = await counter.checksIsolation()
        #expect(isolated)
    }

    /// They write nothing to the loop's eventfd (no thread will ever read it) and leave the loop
    /// ended: it still refuses work.
    @Test(arguments: Ending.allCases)
    func wakeUpAndStopOnAnEndedLoopDoNothing(_ ending: Ending) {
        let loop = ending.makeEndedLoop()
        // Whatever the ending itself left in the eventfd, so that only what follows is counted.
        Platform.drainEventDescriptor(loop.inbox.descriptor)
        loop.wakeUp()
        loop.stop()
        #expect(!Platform.drainEventDescriptor(loop.inbox.descriptor), "the eventfd was written")
        #expect(loop.hasEnded)
        #expect(!loop.perform {})
    }
}

extension LoopBoundCounter {
    /// Whether `assumeIsolated` accepts the thread this method runs on.
    func checksIsolation() -> Bool {
        loop.checkIsolated()
        return loop.isIsolatingCurrentContext() == true
    }
}

/// Adding an item to an ended loop does nothing and leaves the item unbound: added to a live loop
/// afterwards, it works there (no "belongs to one loop" stop, nothing lost).
extension EndedLoopTests {
    enum Kind: String, CaseIterable, Sendable {
        case timer, observer, source, descriptorSource, port, signalSource, frameLink, listener, connection
        case datagramSocket, process
    }

    /// `/bin/sh -c script`, each line of its output (a connection) recorded in `lines`.
    private func shell(_ script: String, linesTo lines: Recorder<String>) throws -> LoopProcess {
        let process = try LoopProcess(
            executable: "/bin/sh", arguments: ["-c", script], standardInput: .null, standardOutput: .connection)
        process.standardOutput?.onRead { _, buffer in
            while let line = buffer.readLine() { lines.append(String(decoding: line, as: UTF8.self)) }
        }
        return process
    }

    @Test(arguments: Kind.allCases)
    func anItemAddedToAnEndedLoopWorksInALiveOneAfterwards(_ kind: Kind) async throws {
        let ended = endedLoop()
        let thread = LoopThread(name: "live-\(kind)")
        defer { thread.stop() }
        let live = thread.loop
        let worked = Recorder<String>()
        // What the case holds until the end of the test.
        var kept: [AnyObject] = []
        var expected = ["worked"]
        switch kind {
        case .timer:
            let timer = LoopTimer(after: .zero) { _ in worked.append("worked") }
            ended.add(timer, forMode: .default)
            #expect(timer.isValid && !ended.contains(timer, inMode: .default))
            live.add(timer, forMode: .default)
        case .observer:
            let observer = LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in worked.append("worked") }
            ended.add(observer, forMode: .default)
            live.add(observer, forMode: .default)
            live.wakeUp()
        case .source:
            let source = LoopSource { worked.append("worked") }
            ended.add(source, forMode: .default)
            live.add(source, forMode: .default)
            source.signal()
            live.wakeUp()
        case .descriptorSource:
            let pair = SocketPair()
            kept.append(pair)
            let source = try LoopDescriptorSource(fileDescriptor: pair.left, events: .readable) { source, _ in
                worked.append("worked")
                source.invalidate()
            }
            ended.add(source, forMode: .default)
            live.add(source, forMode: .default)
            pair.send(1, from: pair.right)
        case .port:
            let port = LoopPort<String> { worked.append($0) }
            kept.append(port)
            port.send("before")
            ended.add(port, forMode: .default)
            live.add(port, forMode: .default)
            port.send("worked")
            expected = ["before", "worked"]
        case .signalSource:
            let source = LoopSignalSource(signal: SIGURG) { _ in worked.append("worked") }
            defer { source.invalidate() }
            ended.add(source, forMode: .default)
            live.add(source, forMode: .default)
            kill(getpid(), SIGURG)
            #expect(await eventually { worked.count == 1 })
        case .frameLink:
            let link = FrameLink(framesPerSecond: 100) { link in
                worked.append("worked")
                link.invalidate()
            }
            link.add(to: ended, forMode: .default)
            link.add(to: live, forMode: .default)
        case .listener:
            let listener = try LoopListener(address: try SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
                worked.append("worked")
                connection.close()
            }
            defer { listener.invalidate() }
            ended.add(listener, forMode: .default)
            live.add(listener, forMode: .default)
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(client) }
            #expect(connectSocket(client, to: listener.localAddress))
            #expect(await eventually { worked.count == 1 })
        case .connection:
            // A child's output stream is the connection that joins a loop after it is made.
            let process = try shell("echo worked", linesTo: worked)
            kept.append(process)
            ended.add(try #require(process.standardOutput), forMode: .default)
            live.add(process, forMode: .default)
        case .datagramSocket:
            let socket = try LoopDatagramSocket(bindingTo: try SocketAddress(ipv4: "127.0.0.1", port: 0))
            defer { socket.invalidate() }
            socket.onReceive { _, bytes, _ in worked.append(String(decoding: bytes, as: UTF8.self)) }
            ended.add(socket, forMode: .default)
            live.add(socket, forMode: .default)
            let sender = try LoopDatagramSocket(bindingTo: try SocketAddress(ipv4: "127.0.0.1", port: 0))
            defer { sender.invalidate() }
            live.add(sender, forMode: .default)
            sender.send("worked".utf8, to: socket.localAddress)
            #expect(await eventually { worked.count == 1 })
        case .process:
            let process = try shell("echo out; exit 3", linesTo: worked)
            kept.append(process)
            process.onExit { _, status in worked.append("\(status)") }
            ended.add(process, forMode: .default)
            #expect(!ended.contains(process, inMode: .default))
            live.add(process, forMode: .default)
            #expect(try await process.exitStatus() == .exited(3))
            expected = ["out", "exited(3)"]
        }
        #expect(await eventually { worked.count >= expected.count }, "\(kind): \(worked.events)")
        #expect(Set(worked.events) == Set(expected), "\(kind)")
        withExtendedLifetime(kept) {}
    }
}
