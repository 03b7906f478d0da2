import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

@Suite struct PortTests {
    /// 4 threads × 5,000 messages: all delivered, none twice, each sender's in order, on the loop's
    /// thread.
    @Test func fourSendersLoseNothingAndKeepOrder() {
        let senders = 4
        let perSender = 5_000
        let received = Recorder<(sender: Int, index: Int)>()
        // A Recorder, not a local Atomic: a handler may not capture a local of a non-copyable type.
        let offLoopThread = Recorder<Bool>()
        onFreshThread {
            let loop = Loop.current
            let port = LoopPort<(sender: Int, index: Int)> { message in
                if !loop.isCurrentThread { offLoopThread.append(true) }
                received.append(message)
                if received.count == senders * perSender { loop.stop() }
            }
            loop.add(port, forMode: .default)
            for sender in 0..<senders {
                Thread.detachNewThread {
                    for index in 0..<perSender { port.send((sender, index)) }
                }
            }
            #expect(loop.run(mode: .default, for: .seconds(20)) == .stopped)
            port.invalidate()
        }
        let events = received.events
        #expect(events.count == senders * perSender)
        #expect(offLoopThread.count == 0)
        for sender in 0..<senders {
            let indices = events.filter { $0.sender == sender }.map(\.index)
            #expect(indices == Array(0..<perSender), "sender \(sender) out of order or incomplete")
        }
    }

    /// iOS's keep-alive pattern: a port with no traffic keeps `.default` alive.
    @Test func idlePortKeepsItsModeAlive() {
        let result = onFreshThread {
            let loop = Loop.current
            let port = LoopPort<Int> { _ in }
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: .milliseconds(30))
        }
        #expect(result == .timedOut)
    }

    @Test func deliveryCountsAsHandledAndWaitsForItsMode() {
        let received = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            let port = LoopPort<String> { received.append($0) }
            loop.add(port, forMode: .default)
            loop.add(LoopSource {}, forMode: .tracking)
            port.send("one")
            // Not delivered in a mode that does not hold the port.
            #expect(loop.run(mode: .tracking, for: .milliseconds(20)) == .timedOut)
            #expect(received.events.isEmpty)
            #expect(loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true) == .handledSource)
            #expect(loop.contains(port, inMode: .default))
            port.invalidate()
            #expect(!port.isValid)
            #expect(!loop.contains(port, inMode: .default))
            port.send("dropped")
        }
        #expect(received.events == ["one"])
    }

    @Test func sendFromAnotherThreadWakesTheLoop() {
        let elapsed = onFreshThread {
            let loop = Loop.current
            let port = LoopPort<Int> { _ in }
            loop.add(port, forMode: .default)
            let start = ContinuousClock.now
            whenAsleep(loop) { port.send(1) }
            #expect(loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)
            return ContinuousClock.now - start
        }
        #expect(elapsed < .seconds(1))
    }

    /// Step 2.5: custom sources first, then due timers, then ports (a message sent from a source or
    /// a timer in that pass is delivered in it).
    @Test func portsAreServedAfterSourcesAndTimers() {
        let calls = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            let port = LoopPort<String> { calls.append("port \($0)") }
            let source = LoopSource {
                calls.append("source")
                port.send("from source")
            }
            let timer = LoopTimer(fireAt: .now - .seconds(1)) { _ in
                calls.append("timer")
                port.send("from timer")
            }
            loop.add(port, forMode: .default)
            loop.add(source, forMode: .default)
            loop.add(timer, forMode: .default)
            port.send("early")
            source.signal()
            loop.run(mode: .default, for: .zero)
            port.invalidate()
            source.invalidate()
        }
        #expect(calls.events == ["source", "timer", "port early", "port from source", "port from timer"])
    }

    /// A handler that runs the loop again (say, to wait for a reply) sees the rest of its port's
    /// messages delivered in the nested run, in order: a message sent meanwhile never overtakes them.
    @Test func aNestedRunInsideAHandlerKeepsTheOrder() {
        let delivered = Recorder<Int>()
        onFreshThread {
            let loop = Loop.current
            var port: LoopPort<Int>!
            port = LoopPort<Int>(
                loop.isolated { message in
                    delivered.append(message)
                    if message == 0 {
                        port.send(3)
                        loop.run(mode: .default, for: .zero)
                    }
                })
            loop.add(port, forMode: .default)
            for message in 0..<3 { port.send(message) }
            loop.run(mode: .default, for: .zero)
            loop.run(mode: .default, for: .zero)
            port.invalidate()
        }
        #expect(delivered.events == [0, 1, 2, 3])
    }
}
