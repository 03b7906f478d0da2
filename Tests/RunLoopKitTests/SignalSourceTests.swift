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
            let source = LoopSignalSource(signal: SIGUSR1) { signal in
                delivered.append(signal)
                onLoopThread = loop.isCurrentThread
            }
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

    @Test func uncatchableSignalIsAProgrammerError() async {
        await #expect(processExitsWith: .failure) {
            _ = LoopSignalSource(signal: SIGKILL) { _ in }
        }
    }
}
