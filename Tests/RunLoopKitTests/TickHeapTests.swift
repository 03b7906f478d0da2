import Testing

@testable import RunLoopKit

/// An element that records where its tracked entry is, as a timer does.
private final class TrackedElement: TickHeapElement {
    var index = -1
    func trackedEntryMoved(to index: Int) { self.index = index }
}

/// The binary heap behind timers and scheduled blocks.
@Suite struct TickHeapTests {
    /// Tracked entries pushed and removed from anywhere in the heap, in a fixed pseudo-random
    /// order: each element always knows where its entry is, and the heap pops in key order.
    @Test func trackedEntriesRemovedFromAnywhereKeepTheOrderAndTheirIndices() {
        var seed: UInt64 = 42
        func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(bound))
        }
        var heap = TickHeap<TrackedElement>()
        var live: [TrackedElement] = []
        var misplaced = 0
        for round in 0..<5_000 {
            if live.isEmpty || next(3) != 0 {
                let element = TrackedElement()
                heap.push(Ticks(next(1_000)), UInt64(round), element, tracked: true)
                live.append(element)
            } else {
                let element = live.remove(at: next(live.count))
                if !heap.isTrackedEntry(at: element.index, of: element) { misplaced += 1 }
                heap.remove(at: element.index)
                if element.index != -1 { misplaced += 1 }
            }
        }
        #expect(misplaced == 0)
        #expect(heap.count == live.count)
        #expect(live.allSatisfy { heap.isTrackedEntry(at: $0.index, of: $0) })
        var previous: TickHeap<TrackedElement>.Entry?
        var outOfOrder = 0
        while let entry = heap.pop() {
            if let previous, entry.precedes(previous) { outOfOrder += 1 }
            previous = entry
        }
        #expect(outOfOrder == 0)
        #expect(live.allSatisfy { $0.index == -1 })
    }
}
