import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// What an item drops (its handler, the objects that handler captures) is released after the
/// item's and the loop's locks: a captured object's deinit may call back into the item, its loop or
/// another item, whichever way the item lets go — `invalidate()`, removal from its last mode, a
/// one-shot's self-invalidation, the loop's teardown. Each scenario runs under a watchdog, so a
/// deadlock fails the test rather than hanging the suite.
@Suite struct ItemReleaseTests {
    @Test(arguments: ReleaseKind.all)
    func invalidatingAnItemNotInALoopReturns(_ kind: ReleaseKind) {
        let finished = returns {
            let specimen = kind.make(CallsBack())
            specimen.invalidate()
        }
        #expect(finished, "invalidating a \(kind) whose handler's capture calls back from its deinit never returned")
    }

    @Test(arguments: ReleaseKind.all)
    func invalidatingAnItemInALoopReturns(_ kind: ReleaseKind) {
        let finished = returns {
            let loop = Loop.current
            let other = LoopSource {}
            loop.add(other, forMode: .default)
            let specimen = kind.make(CallsBack(), loop: loop, other: other)
            specimen.add(to: loop)
            loop.run(mode: .default, for: .milliseconds(1))
            specimen.invalidate()
            loop.run(mode: .default, for: .milliseconds(1))
            other.invalidate()
        }
        #expect(finished, "invalidating a \(kind) in a loop never returned")
    }

    @Test(arguments: ReleaseKind.all)
    func invalidatingFromAnotherThreadReturns(_ kind: ReleaseKind) {
        // The thread is stopped under the watchdog too: a deadlocked item may hold up its loop.
        let finished = returns {
            let thread = LoopThread(name: "release")
            let other = LoopSource {}
            thread.loop.add(other, forMode: .default)
            let specimen = kind.make(CallsBack(), loop: thread.loop, other: other)
            specimen.add(to: thread.loop)
            specimen.invalidate()
            other.invalidate()
            thread.stop()
        }
        #expect(finished, "invalidating a \(kind) from another thread than its loop's never returned")
    }

    @Test(arguments: ReleaseKind.all)
    func removingFromTheLastModeAndDroppingReturns(_ kind: ReleaseKind) {
        let finished = returns {
            let loop = Loop.current
            let other = LoopSource {}
            loop.add(other, forMode: .default)
            do {
                let specimen = kind.make(CallsBack(), loop: loop, other: other)
                specimen.add(to: loop)
                loop.run(mode: .default, for: .milliseconds(1))
                specimen.remove(from: loop)
            }
            // The loop lets go of whatever it still held of the item as it runs.
            for _ in 0..<3 { loop.run(mode: .default, for: .milliseconds(1)) }
            other.invalidate()
        }
        #expect(finished, "removing a \(kind) from its last mode and dropping it never returned")
    }

    @Test(arguments: ReleaseKind.all)
    func tearingDownTheLoopReturns(_ kind: ReleaseKind) {
        let finished = returns {
            let thread = LoopThread(name: "release-teardown")
            let other = LoopSource {}
            thread.loop.add(other, forMode: .default)
            do {
                let specimen = kind.make(CallsBack(), loop: thread.loop, other: other)
                specimen.add(to: thread.loop)
            }
            thread.stop()
        }
        #expect(finished, "stopping a LoopThread whose loop held a \(kind) never returned")
    }

    /// A tolerant timer leaves entries in its mode's heaps when it is removed (while another timer
    /// keeps the heaps); the loop pops them later, and the last reference to a timer the caller
    /// dropped goes with them.
    @Test func aRemovedTolerantTimerReleasedByItsStaleEntriesReturns() {
        let finished = returns {
            let loop = Loop.current
            let other = LoopSource {}
            loop.add(other, forMode: .default)
            let later = LoopTimer(after: .seconds(60)) { _ in }
            loop.add(later, forMode: .default)
            defer { later.invalidate() }
            do {
                let capture = CallsBack()
                capture.onDeinit = { _ = loop.contains(other, inMode: .default) }
                let timer = LoopTimer(after: .milliseconds(1), tolerance: .milliseconds(1)) { _ in capture.touch() }
                loop.add(timer, forMode: .default)
                loop.remove(timer, forMode: .default)
            }
            for _ in 0..<3 { loop.run(mode: .default, for: .milliseconds(3)) }
            other.invalidate()
        }
        #expect(finished, "a removed tolerant timer released by the loop's heaps never returned")
    }

    @Test func aOneShotTimerFiringReturns() {
        let finished = returns {
            let loop = Loop.current
            let fired = Recorder<Bool>()
            do {
                let capture = CallsBack()
                let timer = LoopTimer(after: .zero) { _ in
                    capture.touch()
                    fired.append(true)
                }
                capture.onDeinit = { [weak timer] in _ = timer?.isValid }
                loop.add(timer, forMode: .default)
            }
            runLoop(loop, in: .default) { fired.count > 0 }
        }
        #expect(finished, "a one-shot timer invalidating itself after firing never returned")
    }

    @Test func aNonRepeatingObserverReturns() {
        let finished = returns {
            let loop = Loop.current
            let called = Recorder<Bool>()
            do {
                let capture = CallsBack()
                let observer = LoopObserver(activities: .beforeTimers, repeats: false) { _, _ in
                    capture.touch()
                    called.append(true)
                }
                capture.onDeinit = { [weak observer] in _ = observer?.isValid }
                loop.add(observer, forMode: .default)
            }
            runLoop(loop, in: .default) { called.count > 0 }
        }
        #expect(finished, "a non-repeating observer invalidating itself never returned")
    }

    /// A connection lets go of its handlers once it has closed, however it closed; an object
    /// they capture may call back into the connection, its loop and another item from its
    /// deinit (here: read its queue, write to it, close it again).
    @Test(arguments: ConnectionEnding.allCases)
    func aConnectionReleasesItsHandlersWhenItEnds(_ ending: ConnectionEnding) {
        let finished = returns {
            let thread = LoopThread(name: "release-connection")
            let loop = thread.loop
            let other = LoopSource {}
            loop.add(other, forMode: .default)
            let listener = try! LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { accepted in
                if ending == .peerCloses { accepted.close() }
            }
            loop.add(listener, forMode: .default)
            let connections = Recorder<LoopConnection>()
            let released = DispatchSemaphore(value: 0)
            LoopConnection.connect(to: listener.localAddress, on: loop) { result in
                guard case .success(let connection) = result else { return }
                let capture = CallsBack()
                capture.onDeinit = { [weak connection, weak loop, weak other] in
                    _ = connection?.outputBufferedBytes
                    connection?.enqueue([1])
                    connection?.close()
                    if let loop, let other {
                        _ = loop.contains(other, inMode: .default)
                        other.signal()
                    }
                    released.signal()
                }
                connection.onRead { _, buffer in
                    capture.touch()
                    buffer.consume(buffer.count)
                }
                connection.onEvent { _, _ in capture.touch() }
                connections.append(connection)
            }
            while connections.count == 0 { usleep(1_000) }
            let connection = connections.events[0]
            connections.removeAll()
            switch ending {
            case .close: connection.close()
            case .abort: connection.abort()
            case .peerCloses: break
            case .loopEnds: thread.stop()
            }
            released.wait()
            listener.invalidate()
            other.invalidate()
            thread.stop()
        }
        #expect(finished, "a connection ended by \(ending) never released its handlers, or deadlocked doing so")
    }

    /// The reproduction as a user writes it.
    @Test func theCallingBackSourceReturns() {
        // Sendable, so that the handler may capture it while `make` still sets its source.
        final class Back: @unchecked Sendable {
            weak var source: LoopSource?
            deinit { _ = source?.isValid }
        }
        let finished = returns {
            func make() -> LoopSource {
                let back = Back()
                let source = LoopSource { withExtendedLifetime(back) {} }
                back.source = source
                return source
            }
            make().invalidate()
        }
        #expect(finished)
    }
}

/// An item kind as these tests make it: its handler captures a `CallsBack` whose deinit calls
/// into the item, its loop and another item of that loop.
struct ReleaseKind: Sendable, CustomTestStringConvertible {
    let name: String
    let build: @Sendable (_ capture: CallsBack) -> ReleaseSpecimen

    var testDescription: String { name }

    /// Makes the item; with `loop` and `other`, the capture's deinit also asks the loop about
    /// `other` and signals it.
    func make(_ capture: CallsBack, loop: Loop? = nil, other: LoopSource? = nil) -> ReleaseSpecimen {
        let specimen = build(capture)
        let probe = specimen.probe
        capture.onDeinit = { [weak loop, weak other] in
            probe()
            if let loop, let other {
                _ = loop.contains(other, inMode: .default)
                other.signal()
            }
        }
        return specimen
    }

    static let all: [ReleaseKind] = [
        ReleaseKind(name: "timer") { capture in
            let timer = LoopTimer(after: .seconds(60)) { _ in capture.touch() }
            return ReleaseSpecimen(
                timer, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { _ = $0.isValid })
        },
        ReleaseKind(name: "observer") { capture in
            let observer = LoopObserver(activities: .exit) { _, _ in capture.touch() }
            return ReleaseSpecimen(
                observer, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { _ = $0.isValid })
        },
        ReleaseKind(name: "custom source") { capture in
            let source = LoopSource { capture.touch() }
            return ReleaseSpecimen(
                source, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { $0.signal() })
        },
        ReleaseKind(name: "descriptor source") { capture in
            var ends: [Int32] = [0, 0]
            _ = pipe(&ends)
            close(ends[1])
            let source = try! LoopDescriptorSource(fileDescriptor: ends[0], events: .readable) {
                _, _ in capture.touch()
            }
            return ReleaseSpecimen(
                source, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { _ = $0.isValid })
        },
        ReleaseKind(name: "port") { capture in
            let port = LoopPort<Int> { _ in capture.touch() }
            return ReleaseSpecimen(
                port, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { $0.send(1) })
        },
        ReleaseKind(name: "signal source") { capture in
            let source = LoopSignalSource(signal: SIGUSR2) { _ in capture.touch() }
            return ReleaseSpecimen(
                source, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { _ = $0.isValid })
        },
        ReleaseKind(name: "frame link") { capture in
            let link = FrameLink(framesPerSecond: 1) { _ in capture.touch() }
            return ReleaseSpecimen(
                link, add: { $0.add(to: $1, forMode: .default) }, remove: { $0.remove(from: $1, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { _ = $0.isValid })
        },
        ReleaseKind(name: "listener") { capture in
            let listener = try! LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in
                capture.touch()
            }
            return ReleaseSpecimen(
                listener, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { $0.invalidate() }, probe: { _ = $0.isValid })
        },
        ReleaseKind(name: "process") { capture in
            let process = try! LoopProcess(executable: "/bin/sleep", arguments: ["10"])
            process.onExit { _, _ in capture.touch() }
            return ReleaseSpecimen(
                process, add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                invalidate: { process in
                    process.onExit { _, _ in }  // replaces the capturing handler
                    process.signal(SIGKILL)
                }, probe: { _ = $0.status })
        },
        ReleaseKind(name: "scheduled block") { capture in
            let holder = ScheduledHolder(capture)
            return ReleaseSpecimen(
                holder, add: { $0.schedule(on: $1) }, remove: { holder, _ in holder.cancel() },
                invalidate: { $0.cancel() },
                probe: { $0.probe() })
        },
    ]
}

/// How a connection of `aConnectionReleasesItsHandlersWhenItEnds` ends.
enum ConnectionEnding: String, CaseIterable, Sendable {
    case close, abort, peerCloses, loopEnds
}

/// A block scheduled on a loop (`Loop.schedule`), made before it is scheduled so that the
/// capture is the block's from the start; cancelling stands for invalidating.
final class ScheduledHolder: @unchecked Sendable {
    private var capture: CallsBack?
    private var handle: LoopScheduled?
    private var loop: Loop?

    init(_ capture: CallsBack) { self.capture = capture }

    func schedule(on loop: Loop) {
        guard let capture = capture.take() else { return }
        self.loop = loop
        handle = loop.schedule(after: .seconds(60)) { capture.touch() }
    }

    func cancel() {
        capture = nil
        handle?.cancel()
    }

    /// Calls into the loop's scheduled queue from the capture's deinit.
    func probe() {
        _ = handle?.isCancelled
        loop?.schedule(after: .seconds(60)) {}.cancel()
    }
}

/// An item as a release test holds it.
final class ReleaseSpecimen: @unchecked Sendable {
    private let item: AnyObject
    private let addTo: (AnyObject, Loop) -> Void
    private let removeFrom: (AnyObject, Loop) -> Void
    private let invalidateItem: (AnyObject) -> Void
    /// Calls into the item without keeping it (weakly held).
    let probe: @Sendable () -> Void

    init<Item: AnyObject>(
        _ item: Item, add: @escaping (Item, Loop) -> Void, remove: @escaping (Item, Loop) -> Void,
        invalidate: @escaping (Item) -> Void, probe: @escaping (Item) -> Void
    ) {
        self.item = item
        addTo = { add($0 as! Item, $1) }
        removeFrom = { remove($0 as! Item, $1) }
        invalidateItem = { invalidate($0 as! Item) }
        let weakItem = WeakBox(item)
        let call = UncheckedValue(probe)
        self.probe = { weakItem.value.map { call.value($0) } }
    }

    func add(to loop: Loop) { addTo(item, loop) }
    func remove(from loop: Loop) { removeFrom(item, loop) }
    func invalidate() { invalidateItem(item) }
}

private final class WeakBox<Value: AnyObject>: @unchecked Sendable {
    weak var value: Value?
    init(_ value: Value) { self.value = value }
}

private struct UncheckedValue<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
