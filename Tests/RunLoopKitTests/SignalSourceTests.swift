import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

@Suite(.serialized) struct SignalSourceTests {
    /// A signal sent to the whole process lands on whichever thread the kernel picks (this process
    /// has many that do not block it) and is delivered on the loop's thread.
    @Test func processWideSignalIsDeliveredOnTheLoopThread() {
        let delivered = Recorder<Int32>()
        let (result, onLoopThread) = onFreshThread {
            let loop = Loop.current
            var onLoopThread = false
            let source = LoopSignalSource(
                signal: SIGUSR1,
                loop.isolated { signal in
                    delivered.append(signal)
                    onLoopThread = loop.isCurrentThread
                })
            loop.add(source, forMode: .default)
            whenAsleep(loop) { kill(getpid(), SIGUSR1) }
            let result = loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
            source.invalidate()
            return (result, onLoopThread)
        }
        #expect(result == .handledSource)
        #expect(delivered.events == [SIGUSR1])
        #expect(onLoopThread)
    }

    /// Two loops watching the same signal both get it.
    @Test func everySourceOfASignalGetsIt() {
        let delivered = Recorder<String>()
        let first = LoopThread(name: "signal-a")
        let second = LoopThread(name: "signal-b")
        defer {
            first.stop()
            second.stop()
        }
        let a = LoopSignalSource(signal: SIGUSR2) { _ in delivered.append("a") }
        let b = LoopSignalSource(signal: SIGUSR2) { _ in delivered.append("b") }
        first.loop.add(a, forMode: .default)
        second.loop.add(b, forMode: .default)
        kill(getpid(), SIGUSR2)
        let deadline = ContinuousClock.now + .seconds(5)
        while delivered.count < 2 && ContinuousClock.now < deadline {
            usleep(1_000)
        }
        a.invalidate()
        b.invalidate()
        #expect(Set(delivered.events) == ["a", "b"])
    }

    /// Invalidating the last source restores the previous action (here: ignore).
    @Test func lastInvalidateRestoresThePreviousAction() {
        signal(SIGUSR1, SIG_IGN)
        let source = LoopSignalSource(signal: SIGUSR1) { _ in }
        source.invalidate()
        #expect(!source.isValid)
        var current = sigaction()
        sigaction(SIGUSR1, nil, &current)
        #expect(
            unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self))
        // Raising it now must not kill the process.
        kill(getpid(), SIGUSR1)
    }

    /// A source added to a loop and dropped by its caller keeps catching its signal: the loop holds
    /// it. In a child process, since the failure is the signal's default action, which ends it.
    @Test func aDroppedSourceKeepsCatchingItsSignal() async {
        await #expect(processExitsWith: .success) {
            let delivered = DispatchSemaphore(value: 0)
            let thread = LoopThread(name: "dropped-signal")
            thread.loop.add(LoopSignalSource(signal: SIGUSR2) { _ in delivered.signal() }, forMode: .default)
            // Sent once the loop has taken the source in, so the test is of the drop, not of a race.
            let added = DispatchSemaphore(value: 0)
            thread.loop.perform { added.signal() }
            guard added.wait(timeout: .now() + 5) == .success else { exit(2) }
            kill(getpid(), SIGUSR2)
            exit(delivered.wait(timeout: .now() + 5) == .success ? EXIT_SUCCESS : 3)
        }
    }

    /// Removed from every mode and dropped, the source goes: the previous action is back.
    @Test func aRemovedAndDroppedSourceRestoresThePreviousAction() {
        signal(SIGUSR1, SIG_IGN)
        let thread = LoopThread(name: "removed-signal")
        defer { thread.stop() }
        weak var weakSource: LoopSignalSource?
        do {
            let source = LoopSignalSource(signal: SIGUSR1) { _ in }
            weakSource = source
            thread.loop.add(source, forMode: .default)
            thread.loop.remove(source, forMode: .default)
        }
        #expect(weakSource == nil)
        var current = sigaction()
        sigaction(SIGUSR1, nil, &current)
        #expect(
            unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self))
    }

    @Test func uncatchableSignalIsAProgrammerError() async {
        await #expect(processExitsWith: .failure) {
            _ = LoopSignalSource(signal: SIGKILL) { _ in }
        }
    }
}
