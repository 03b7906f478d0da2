import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// A loop keeps what it holds: an item added to a loop works with no other reference to it, an
/// item removed from every mode goes with its last reference, and a loop that has ended takes no
/// item (which then stays usable on another loop). One table of item kinds, one test per rule.
@Suite struct ItemLifetimeTests {
    @Test(arguments: HeldItemKind.all)
    func aDroppedItemKeepsWorking(_ kind: HeldItemKind) {
        let (heldByTheLoop, fired) = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            let fired = Recorder<Bool>()
            let counter = DeinitCounter()
            let specimen = kind.make({ fired.append(true) }, counter.make())
            specimen.add(to: loop)
            specimen.drop()
            let heldByTheLoop = specimen.item != nil
            specimen.trigger()
            let deadline = ContinuousClock.now + .seconds(5)
            while fired.count == 0 && ContinuousClock.now < deadline {
                loop.run(mode: .default, for: .milliseconds(20))
            }
            specimen.invalidate()
            keepAlive.invalidate()
            return (heldByTheLoop, fired.count)
        }
        #expect(heldByTheLoop, "the loop should hold a \(kind) its caller dropped")
        #expect(fired > 0, "a \(kind) added to a loop and dropped by its caller should keep working")
    }

    @Test(arguments: HeldItemKind.all)
    func aRemovedAndDroppedItemIsReleased(_ kind: HeldItemKind) {
        let counter = DeinitCounter()
        let released = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            let specimen = kind.make({}, counter.make())
            specimen.add(to: loop)
            // The loop has seen the item (registered its descriptor, cached its mode) before it goes.
            loop.run(mode: .default, for: .milliseconds(1))
            specimen.remove(from: loop)
            specimen.drop()
            loop.run(mode: .default, for: .milliseconds(1))
            let released = specimen.item == nil
            keepAlive.invalidate()
            return released
        }
        #expect(released, "a \(kind) removed from every mode should go with its last reference")
        #expect(counter.value == 1, "what the \(kind)'s handler held should be released")
    }

    @Test(arguments: HeldItemKind.all)
    func addingToAnEndedLoopDoesNothingAndTheItemStaysUsable(_ kind: HeldItemKind) {
        let ended = endedLoop()
        let fired = Recorder<Bool>()
        let counter = DeinitCounter()
        let specimen = kind.make({ fired.append(true) }, counter.make())
        specimen.add(to: ended)
        #expect(specimen.contains(in: ended) != true, "an ended loop should not take a \(kind)")
        let servedElsewhere = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            // A programmer error if the ended loop had kept the item as its own.
            specimen.add(to: loop)
            specimen.trigger()
            let deadline = ContinuousClock.now + .seconds(5)
            while fired.count == 0 && ContinuousClock.now < deadline {
                loop.run(mode: .default, for: .milliseconds(20))
            }
            keepAlive.invalidate()
            return fired.count > 0
        }
        specimen.invalidate()
        #expect(servedElsewhere, "a \(kind) refused by an ended loop should work on another loop")
    }

    // MARK: The hang monitor (attached to one loop at creation, not added to modes)

    @Test func aDroppedHangMonitorKeepsReporting() {
        let reports = Recorder<Duration>()
        let reported = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            weak var monitor: LoopHangMonitor?
            do {
                let dropped = LoopHangMonitor(loop: loop, threshold: .milliseconds(1)) { reports.append($0.duration) }
                monitor = dropped
            }
            loop.perform(inModes: [.default]) { usleep(10_000) }
            loop.run(mode: .default, for: .milliseconds(50))
            monitor?.invalidate()
            keepAlive.invalidate()
            return reports.count
        }
        #expect(reported > 0, "a hang monitor its caller dropped should still report")
    }

    @Test func anInvalidatedHangMonitorIsReleased() {
        let thread = LoopThread(name: "monitored")
        defer { thread.stop() }
        weak var weakMonitor: LoopHangMonitor?
        do {
            let monitor = LoopHangMonitor(loop: thread.loop, threshold: .milliseconds(1)) { _ in }
            weakMonitor = monitor
            monitor.invalidate()
        }
        // The loop drops it once it has picked up the change.
        #expect(waitUntil { weakMonitor == nil })
    }

    @Test func anEndedLoopKeepsNoHangMonitor() {
        weak var weakMonitor: LoopHangMonitor?
        do {
            let monitor = LoopHangMonitor(loop: endedLoop(), threshold: .milliseconds(1)) { _ in }
            weakMonitor = monitor
        }
        #expect(weakMonitor == nil)
    }
}

/// One kind of item, made for a test: its handler calls `fired` and holds `tracked`.
struct HeldItemKind: Sendable, CustomTestStringConvertible {
    let name: String
    let make: @Sendable (_ fired: @escaping @Sendable () -> Void, _ tracked: Tracked) -> Specimen

    var testDescription: String { name }

    static let all: [HeldItemKind] = [
        HeldItemKind(name: "timer") { fired, tracked in
            Specimen(
                LoopTimer(after: .milliseconds(5)) { _ in
                    tracked.touch()
                    fired()
                },
                add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                contains: { $1.contains($0, inMode: .default) }, invalidate: { $0.invalidate() })
        },
        HeldItemKind(name: "observer") { fired, tracked in
            Specimen(
                LoopObserver(activities: .beforeWaiting) { _, _ in
                    tracked.touch()
                    fired()
                },
                add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                contains: { $1.contains($0, inMode: .default) }, invalidate: { $0.invalidate() })
        },
        HeldItemKind(name: "custom source") { fired, tracked in
            Specimen(
                LoopSource {
                    tracked.touch()
                    fired()
                },
                add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                contains: { $1.contains($0, inMode: .default) }, invalidate: { $0.invalidate() },
                trigger: { $0.signal() })
        },
        HeldItemKind(name: "descriptor source") { fired, tracked in
            let pipe = Pipe()
            let readEnd = pipe.fileHandleForReading.fileDescriptor
            let source = try! LoopDescriptorSource(fileDescriptor: readEnd, events: .readable) { source, _ in
                var byte: UInt8 = 0
                _ = read(source.fileDescriptor, &byte, 1)
                tracked.touch()
                fired()
            }
            return Specimen(
                source, resources: pipe,
                add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                contains: { $1.contains($0, inMode: .default) }, invalidate: { $0.invalidate() },
                trigger: { _ in pipe.fileHandleForWriting.write(Data([1])) })
        },
        HeldItemKind(name: "port") { fired, tracked in
            Specimen(
                LoopPort<Int> { _ in
                    tracked.touch()
                    fired()
                },
                add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                contains: { $1.contains($0, inMode: .default) }, invalidate: { $0.invalidate() },
                trigger: { $0.send(1) })
        },
        HeldItemKind(name: "signal source") { fired, tracked in
            // Never sent here (see SignalSourceTests for the delivery after a drop): made to fire
            // through its eventfd, as the signal handler does.
            Specimen(
                LoopSignalSource(signal: SIGUSR2) { _ in
                    tracked.touch()
                    fired()
                },
                add: { $1.add($0, forMode: .default) }, remove: { $1.remove($0, forMode: .default) },
                contains: { $1.contains($0, inMode: .default) }, invalidate: { $0.invalidate() },
                trigger: { source in
                    var one: UInt64 = 1
                    _ = write(source.descriptorSource.fileDescriptor, &one, 8)
                })
        },
        HeldItemKind(name: "frame link") { fired, tracked in
            Specimen(
                FrameLink(framesPerSecond: 200) { _ in
                    tracked.touch()
                    fired()
                },
                add: { $0.add(to: $1, forMode: .default) }, remove: { $0.remove(from: $1, forMode: .default) },
                contains: nil, invalidate: { $0.invalidate() })
        },
    ]
}

/// An item as a test holds it: strongly until `drop()`, weakly after, so that the test sees
/// whether the loop keeps it.
final class Specimen: @unchecked Sendable {
    private var strong: AnyObject?
    private(set) weak var item: AnyObject?
    /// What the item needs besides itself (a pipe), kept for the whole test.
    private let resources: AnyObject?
    private let addTo: (AnyObject, Loop) -> Void
    private let removeFrom: (AnyObject, Loop) -> Void
    private let containedIn: ((AnyObject, Loop) -> Bool)?
    private let invalidateItem: (AnyObject) -> Void
    private let triggerItem: (AnyObject) -> Void

    init<Item: AnyObject>(
        _ item: Item, resources: AnyObject? = nil, add: @escaping (Item, Loop) -> Void,
        remove: @escaping (Item, Loop) -> Void, contains: ((Item, Loop) -> Bool)?,
        invalidate: @escaping (Item) -> Void, trigger: @escaping (Item) -> Void = { _ in }
    ) {
        strong = item
        self.item = item
        self.resources = resources
        addTo = { add($0 as! Item, $1) }
        removeFrom = { remove($0 as! Item, $1) }
        containedIn = contains.map { contains in { contains($0 as! Item, $1) } }
        invalidateItem = { invalidate($0 as! Item) }
        triggerItem = { trigger($0 as! Item) }
    }

    func add(to loop: Loop) { item.map { addTo($0, loop) } }
    func remove(from loop: Loop) { item.map { removeFrom($0, loop) } }
    /// Nil for kinds that cannot say.
    func contains(in loop: Loop) -> Bool? { item.flatMap { item in containedIn.map { $0(item, loop) } } }
    func invalidate() { item.map(invalidateItem) }
    /// Makes the item fire (nothing to do for timers, observers and frame links).
    func trigger() { item.map(triggerItem) }
    func drop() { strong = nil }
}
