import AllocationCounter
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

    /// After a delivery the loop looks at the port again by itself, and senders stop signalling it
    /// until the loop finds it empty: a message sent to a loop asleep after a delivery still wakes
    /// it, and one sent after the handler took the port out of its mode is delivered once the port
    /// is added back (to a loop asleep, which no sender signals).
    @Test func aBusyPortStillWakesTheLoopAndSurvivesARemoval() {
        let received = Recorder<Int>()
        let elapsed = onFreshThread {
            let loop = Loop.current
            var port: LoopPort<Int>!
            port = LoopPort<Int>(
                loop.isolated { message in
                    received.append(message)
                    if message == 3 { loop.remove(port, forMode: .default) }
                })
            let sender: LoopPort<Int> = port
            loop.add(port, forMode: .default)
            port.send(1)
            #expect(loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true) == .handledSource)
            let start = ContinuousClock.now
            whenAsleep(loop) { sender.send(2) }
            #expect(loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)
            let woken = ContinuousClock.now - start
            port.send(3)
            #expect(loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true) == .handledSource)
            loop.add(LoopSource {}, forMode: .default)
            port.send(4)
            #expect(loop.run(mode: .default, for: .milliseconds(20)) == .timedOut)
            let readded = ContinuousClock.now
            whenAsleep(loop) { loop.add(sender, forMode: .default) }
            #expect(loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)
            let delivered = ContinuousClock.now - readded
            port.invalidate()
            return max(woken, delivered)
        }
        #expect(received.events == [1, 2, 3, 4])
        #expect(elapsed < .seconds(1))
    }

    /// While an instrument listens, messages carry their posting time from the first delivery
    /// on (the port learns at each delivery whether to stamp): the queue delay of all 10 of a
    /// second batch is counted, and of none sent before metrics were on.
    @Test func messagesCarryTheirQueueDelayWhileMetricsAreOn() {
        let counted = onFreshThread { () -> (before: UInt64, after: UInt64) in
            let loop = Loop.current
            let port = LoopPort<Int> { _ in }
            loop.add(port, forMode: .default)
            port.send(0)
            loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true)
            loop.collectsMetrics = true
            port.send(1)
            loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true)
            let before = loop.metrics.queueDelayCount
            port.send(contentsOf: 2..<7)
            for message in 7..<12 { port.send(message) }
            loop.run(mode: .default, for: .seconds(2), returnAfterSourceHandled: true)
            let after = loop.metrics.queueDelayCount
            port.invalidate()
            return (before, after)
        }
        #expect(counted.before == 0)
        #expect(counted.after == 10)
    }

    /// `send(contentsOf:)` from 4 threads, from an array and from a sequence without contiguous
    /// storage: every message delivered once, each call's messages together and in order, each
    /// sender's calls in order; an empty sequence and a send after `invalidate()` deliver nothing.
    @Test func batchSendsArriveWholeAndInOrder() {
        let senders = 4
        let batches = 200
        let perBatch = 50
        let received = Recorder<(sender: Int, index: Int)>()
        onFreshThread {
            let loop = Loop.current
            let port = LoopPort<(sender: Int, index: Int)> { message in
                received.append(message)
                if received.count == senders * batches * perBatch { loop.stop() }
            }
            loop.add(port, forMode: .default)
            for sender in 0..<senders {
                Thread.detachNewThread {
                    port.send(contentsOf: [])
                    for batch in 0..<batches {
                        let indices = batch * perBatch..<(batch + 1) * perBatch
                        if batch.isMultiple(of: 2) {
                            port.send(contentsOf: indices.map { (sender, $0) })
                        } else {
                            port.send(contentsOf: indices.lazy.map { (sender, $0) })
                        }
                    }
                }
            }
            #expect(loop.run(mode: .default, for: .seconds(20)) == .stopped)
            port.invalidate()
            port.send(contentsOf: [(0, -1)])
            #expect(loop.run(mode: .default, for: .zero) == .finished)
        }
        let events = received.events
        #expect(events.count == senders * batches * perBatch)
        for sender in 0..<senders {
            let indices = events.filter { $0.sender == sender }.map(\.index)
            #expect(indices == Array(0..<batches * perBatch), "sender \(sender) out of order or incomplete")
        }
        // Each call's messages are consecutive: a batch starts at a multiple of `perBatch` and the
        // next `perBatch - 1` messages are the same sender's following ones.
        var position = 0
        while position < events.count {
            let first = events[position]
            #expect(first.index % perBatch == 0, "a batch interleaved at \(position)")
            let whole = events[position..<min(position + perBatch, events.count)].elementsEqual(
                (first.index..<first.index + perBatch).map { (first.sender, $0) }, by: { $0 == $1 })
            #expect(whole, "the batch at \(position) is not whole")
            position += perBatch
        }
    }

    /// Messages that hold references, through the path compiled in the caller's module for their
    /// type: each one delivered, dropped by `invalidate()` from inside the handler, or sent after
    /// it is released exactly once. 4 threads send 2,000 each; once they are done, the handler
    /// invalidates the port at the 3,000th message; a send after that is dropped.
    @Test func messagesHoldingReferencesAreReleasedOnceWhetherDeliveredOrDropped() {
        /// Counts its tokens' releases.
        final class Releases: Sendable {
            let count = Atomic<Int>(0)
        }
        final class Token: Sendable {
            let releases: Releases
            let sender: Int
            let index: Int
            init(_ releases: Releases, sender: Int, index: Int) {
                self.releases = releases
                self.sender = sender
                self.index = index
            }
            deinit { releases.count.add(1, ordering: .relaxed) }
        }
        struct Parcel: Sendable {
            let token: Token
            let label: String
        }
        /// The port, for its own handler to invalidate it.
        final class Holder: @unchecked Sendable {
            var port: LoopPort<Parcel>?
        }
        let senders = 4
        let perSender = 2_000
        let stopAt = 3_000
        let releases = Releases()
        let received = Recorder<(sender: Int, index: Int)>()
        let allSent = DispatchSemaphore(value: 0)
        onFreshThread {
            let loop = Loop.current
            let holder = Holder()
            let port = LoopPort<Parcel> { parcel in
                #expect(parcel.label == "parcel \(parcel.token.index)")
                received.append((parcel.token.sender, parcel.token.index))
                guard received.count == stopAt else { return }
                // With every parcel sent, the rest of this batch and what was sent after it are
                // dropped.
                #expect(allSent.wait(timeout: .now() + 20) == .success)
                holder.port?.invalidate()
                loop.stop()
            }
            holder.port = port
            loop.add(port, forMode: .default)
            let finished = DispatchGroup()
            for sender in 0..<senders {
                finished.enter()
                Thread.detachNewThread {
                    for index in 0..<perSender {
                        port.send(
                            Parcel(token: Token(releases, sender: sender, index: index), label: "parcel \(index)"))
                    }
                    finished.leave()
                }
            }
            finished.notify(queue: .global()) { allSent.signal() }
            #expect(loop.run(mode: .default, for: .seconds(20)) == .stopped)
            #expect(!port.isValid)
            port.send(Parcel(token: Token(releases, sender: -1, index: -1), label: "late"))
        }
        let events = received.events
        #expect(events.count == stopAt)
        for sender in 0..<senders {
            let indices = events.filter { $0.sender == sender }.map(\.index)
            #expect(indices == Array(0..<indices.count), "sender \(sender) out of order")
        }
        // Every parcel made, the late one included, is released, none twice.
        #expect(releases.count.load(ordering: .relaxed) == senders * perSender + 1)
    }

    /// A port of a value type allocates nothing per message once its buffers have grown: at most
    /// 1,000 allocation calls on the sending thread and the loop's thread together for 1,000,000
    /// messages sent one by one, after 100,000 that let the buffers grow. Counted by the
    /// AllocationCounter target, whose `malloc`, `calloc`, `realloc` and aligned allocations the
    /// test executable uses in place of glibc's: each adds to a counter of the calling thread.
    ///
    /// The messages go in rounds of 62,500, each sent while the loop waits in the handler of the
    /// previous round's last message, so that a round is one batch: the loop's passes stay few
    /// whatever the timing (in a debug build a pass allocates the frames of its accessors).
    @Test(.enabled(if: rlk_allocation_counting() != 0, "sanitizer builds count no allocations"))
    func aValueMessageAllocatesNothingInSteadyState() {
        struct Reading: Sendable {
            var index: Int
            var weight: Int
            var sender: Int
        }
        /// The loop thread's state, touched only there.
        final class Delivered: @unchecked Sendable {
            var count = 0
            var sum = 0
            var allocationsAtStart: UInt64 = 0
            var allocationsAtEnd: UInt64 = 0
        }
        let round = 62_500
        let warmUpRounds = 2
        let rounds = warmUpRounds + 16
        let delivered = Delivered()
        let senderAllocations = Locked<UInt64?>(nil)
        let roundDelivered = DispatchSemaphore(value: 0)
        let roundSent = DispatchSemaphore(value: 0)
        let sent = DispatchSemaphore(value: 0)
        let result = onFreshThread {
            let loop = Loop.current
            let port = LoopPort<Reading> { reading in
                delivered.sum &+= reading.index &* reading.weight &+ reading.sender
                delivered.count += 1
                guard delivered.count.isMultiple(of: round) else { return }
                if delivered.count == warmUpRounds * round { delivered.allocationsAtStart = rlk_thread_allocations() }
                if delivered.count == rounds * round {
                    delivered.allocationsAtEnd = rlk_thread_allocations()
                    loop.stop()
                    return
                }
                roundDelivered.signal()
                _ = roundSent.wait(timeout: .now() + 30)
            }
            loop.add(port, forMode: .default)
            Thread.detachNewThread {
                var start: UInt64 = 0
                for number in 0..<rounds {
                    // The loop waits at the end of the previous round until this one is sent.
                    if number > 0 { _ = roundDelivered.wait(timeout: .now() + 30) }
                    if number == warmUpRounds { start = rlk_thread_allocations() }
                    for index in number * round..<(number + 1) * round {
                        port.send(Reading(index: index, weight: index & 7, sender: 1))
                    }
                    if number > 0 { roundSent.signal() }
                }
                let end = rlk_thread_allocations()
                senderAllocations.withLock { $0 = end - start }
                sent.signal()
            }
            let result = loop.run(mode: .default, for: .seconds(120))
            port.invalidate()
            return result
        }
        #expect(result == .stopped)
        #expect(sent.wait(timeout: .now() + 30) == .success)
        #expect(delivered.count == rounds * round)
        let onSender = senderAllocations.withLock { $0 } ?? .max
        let onLoop = delivered.allocationsAtEnd &- delivered.allocationsAtStart
        #expect(
            onSender <= 1_000 && onLoop <= 1_000 - min(onSender, 1_000),
            "sender \(onSender), loop \(onLoop) allocations")
    }

    /// 8 threads × 60,000 messages, sent one by one and in calls of 1 to 700 (across the 509-slot
    /// chunks), while the handler runs a nested run every 5,000th message: each sender's messages
    /// arrive once and in order, whoever is preempted where.
    @Test func manySendersAcrossManyChunksKeepTheirOrder() {
        let senders = 8
        let perSender = 60_000
        /// The loop thread's tallies.
        final class Tally: @unchecked Sendable {
            var next = [Int](repeating: 0, count: 8)
            var count = 0
            var outOfOrder = 0
            var nested = 0
        }
        let tally = Tally()
        onFreshThread {
            let loop = Loop.current
            let port = LoopPort<(sender: Int, index: Int)> { message in
                if tally.next[message.sender] != message.index { tally.outOfOrder += 1 }
                tally.next[message.sender] = message.index + 1
                tally.count += 1
                if tally.count.isMultiple(of: 5_000) {
                    tally.nested += 1
                    _ = loop.run(mode: .default, for: .zero)
                }
                // After the nested run, which would take the stop.
                if tally.count == senders * perSender { loop.stop() }
            }
            loop.add(port, forMode: .default)
            for sender in 0..<senders {
                Thread.detachNewThread {
                    var generator = SystemRandomNumberGenerator()
                    var index = 0
                    while index < perSender {
                        let count = min(perSender - index, Int.random(in: 1...700, using: &generator))
                        if count > 350 {
                            for position in index..<index + count { port.send((sender, position)) }
                        } else {
                            port.send(contentsOf: (index..<index + count).map { (sender, $0) })
                        }
                        index += count
                    }
                }
            }
            #expect(loop.run(mode: .default, for: .seconds(120)) == .stopped)
            port.invalidate()
        }
        #expect(tally.count == senders * perSender)
        #expect(tally.outOfOrder == 0)
        #expect(tally.next == [Int](repeating: perSender, count: senders))
        #expect(tally.nested > 0)
    }

    /// Messages of no size and of 2 KiB (8 to a chunk of their own, from malloc) from 4 threads: all arrive, intact.
    @Test func emptyAndLargeMessagesArriveIntact() {
        struct Large: Sendable {
            var words = InlineArray<256, Int>(repeating: 0)
        }
        let senders = 4
        let perSender = 5_000
        let counts = Recorder<String>()
        /// The loop thread's tallies.
        final class Tally: @unchecked Sendable {
            var empties = 0
            var larges = 0
            var damaged = 0
            var isComplete: Bool { empties == 4 * 5_000 && larges == 4 * 5_000 }
        }
        onFreshThread {
            let loop = Loop.current
            let tally = Tally()
            let empty = LoopPort<Void> { _ in
                tally.empties += 1
                if tally.isComplete { loop.stop() }
            }
            let large = LoopPort<Large> { message in
                tally.larges += 1
                let words = message.words
                if words[0] != words[255] || words[128] != -words[0] { tally.damaged += 1 }
                if tally.isComplete { loop.stop() }
            }
            loop.add(empty, forMode: .default)
            loop.add(large, forMode: .default)
            for sender in 0..<senders {
                Thread.detachNewThread {
                    for index in 0..<perSender {
                        empty.send(())
                        var message = Large()
                        message.words[0] = sender * perSender + index
                        message.words[128] = -(sender * perSender + index)
                        message.words[255] = sender * perSender + index
                        large.send(message)
                    }
                }
            }
            #expect(loop.run(mode: .default, for: .seconds(60)) == .stopped)
            counts.append("empty \(tally.empties), large \(tally.larges), damaged \(tally.damaged)")
            empty.invalidate()
            large.invalidate()
        }
        #expect(counts.events == ["empty \(senders * perSender), large \(senders * perSender), damaged 0"])
    }

    /// `invalidate()` from another thread drops, before it returns, what the loop had not taken;
    /// with 4 threads sending meanwhile, every message is released once (delivered, dropped by
    /// `invalidate()`, skipped as sent too late, or dropped with the port).
    @Test func invalidateFromAnotherThreadReleasesUndeliveredMessagesOnce() {
        final class Token: Sendable {
            let releases: Locked<Int>
            init(_ releases: Locked<Int>) { self.releases = releases }
            deinit { releases.withLock { $0 += 1 } }
        }
        struct Parcel: Sendable {
            let token: Token
            let index: Int
        }
        // A loop that is never run: nothing is delivered, so invalidate drops all 100,000 at once.
        // They are more than the senders may run ahead of the loop before yielding: a yield is not a
        // wait, so the sends all return.
        let releases = Locked(0)
        let idle = LoopThread(name: "idle-port-loop")
        defer { idle.shutdown() }
        let waiting = LoopPort<Parcel> { _ in }
        idle.loop.add(waiting, forMode: .tracking)
        for index in 0..<100_000 { waiting.send(Parcel(token: Token(releases), index: index)) }
        #expect(releases.current == 0)
        waiting.invalidate()
        #expect(releases.current == 100_000)
        waiting.send(Parcel(token: Token(releases), index: -1))
        #expect(releases.current == 100_001)

        // A running loop, 4 senders, and an invalidate from this thread in the middle.
        let sent = Locked(0)
        let delivered = Locked(0)
        let busy = LoopThread(name: "busy-port-loop")
        defer { busy.shutdown() }
        do {
            let port = LoopPort<Parcel> { _ in delivered.withLock { $0 += 1 } }
            busy.loop.add(port, forMode: .default)
            let finished = DispatchGroup()
            let halfway = DispatchSemaphore(value: 0)
            for sender in 0..<4 {
                finished.enter()
                Thread.detachNewThread {
                    for index in 0..<20_000 {
                        port.send(Parcel(token: Token(releases), index: index))
                        sent.withLock { $0 += 1 }
                        if sender == 0 && index == 10_000 { halfway.signal() }
                    }
                    finished.leave()
                }
            }
            #expect(halfway.wait(timeout: .now() + 60) == .success)
            port.invalidate()
            #expect(!port.isValid)
            #expect(finished.wait(timeout: .now() + 60) == .success)
        }
        // The loop let go of the port once it left its mode; the released count settles there.
        let deadline = ContinuousClock.now + .seconds(30)
        while releases.current != 100_001 + 80_000 && ContinuousClock.now < deadline { usleep(1_000) }
        #expect(sent.current == 80_000)
        #expect(releases.current == 100_001 + 80_000)
        #expect(delivered.current <= 80_000)
    }

    /// A burst of 100,000 three-word messages takes some 250 chunks; once they are delivered the
    /// port keeps a few (`PortChannel.storedChunksKeptAhead`) and gives the others back to the
    /// process's store, where the memory of all but 256 free blocks goes back to the kernel.
    @Test func aPortKeepsFewChunksAfterABurst() {
        struct Reading: Sendable {
            var index: Int
            var weight: Int
            var sender: Int
        }
        let held = onFreshThread { () -> (during: Int, after: Int, delivered: Int) in
            let loop = Loop.current
            var delivered = 0
            let port = LoopPort<Reading>(loop.isolated { _ in delivered += 1 })
            loop.add(port, forMode: .default)
            for index in 0..<100_000 { port.send(Reading(index: index, weight: index & 7, sender: 0)) }
            let during = port.mailbox.chunksHeld
            while delivered < 100_000,
                loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: true) != .timedOut
            {}
            // A pass after the delivery: the chunks are recycled at the end of a batch.
            _ = loop.run(mode: .default, for: .zero)
            let after = port.mailbox.chunksHeld
            port.invalidate()
            return (during, after, delivered)
        }
        #expect(held.delivered == 100_000)
        #expect(held.during >= 100_000 / 408)
        #expect(held.after <= 6, "\(held.after) chunks held")
    }

    /// A port released with messages waiting (never invalidated, never added) releases them.
    @Test func aPortLetGoOfReleasesItsWaitingMessages() {
        final class Token: Sendable {
            let releases: Locked<Int>
            init(_ releases: Locked<Int>) { self.releases = releases }
            deinit { releases.withLock { $0 += 1 } }
        }
        let releases = Locked(0)
        do {
            let port = LoopPort<Token> { _ in }
            for _ in 0..<1_000 { port.send(Token(releases)) }
            #expect(releases.current == 0)
        }
        #expect(releases.current == 1_000)
    }
}
