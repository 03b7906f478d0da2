import Testing

@testable import RunLoopKit

/// An element that records where its tracked entry is, as a timer does.
private final class TrackedElement: TickHeapElement {
    var index = -1
    var secondIndex = -1
    func trackedEntryMoved(to index: Int, as track: TickHeapTrack) {
        if track == .second { secondIndex = index } else { self.index = index }
    }
}

/// A fixed pseudo-random sequence (a linear congruential generator), so a failure repeats.
private struct SeededSequence {
    var seed: UInt64
    mutating func next(_ bound: Int) -> Int {
        seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((seed >> 33) % UInt64(bound))
    }
}

/// Pops every entry; returns how many came out of key order.
private func popAllCountingDisorder(_ heap: inout TickHeap<TrackedElement>) -> Int {
    var previous: TickHeap<TrackedElement>.Entry?
    var outOfOrder = 0
    while let entry = heap.pop() {
        if let previous, entry.precedes(previous) { outOfOrder += 1 }
        previous = entry
    }
    return outOfOrder
}

/// The binary heap behind timers and scheduled blocks.
@Suite struct TickHeapTests {
    /// Tracked entries pushed and removed from anywhere in the heap, in a fixed pseudo-random
    /// order: each element always knows where its entry is, and the heap pops in key order.
    @Test func trackedEntriesRemovedFromAnywhereKeepTheOrderAndTheirIndices() {
        var random = SeededSequence(seed: 42)
        func next(_ bound: Int) -> Int { random.next(bound) }
        var heap = TickHeap<TrackedElement>()
        var live: [TrackedElement] = []
        var misplaced = 0
        for round in 0..<5_000 {
            if live.isEmpty || next(3) != 0 {
                let element = TrackedElement()
                heap.push(Ticks(next(1_000)), UInt64(round), element, tracked: .first)
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
        #expect(popAllCountingDisorder(&heap) == 0)
        #expect(live.allSatisfy { $0.index == -1 })
    }

    /// Tracked entries given new keys in place (a re-armed timer), in a fixed pseudo-random
    /// order, with entries of the second track (a tolerant timer's latest fire time) beside them:
    /// the heap keeps its order and its size, and each element knows where both its entries are.
    @Test func trackedEntriesUpdatedInPlaceKeepTheOrderAndTheirIndices() {
        var random = SeededSequence(seed: 7)
        var heap = TickHeap<TrackedElement>()
        let elements = (0..<300).map { _ in TrackedElement() }
        for (number, element) in elements.enumerated() {
            heap.push(Ticks(random.next(10_000)), UInt64(number), element, tracked: .first)
            heap.push(Ticks(random.next(10_000)), UInt64(number), element, tracked: .second)
        }
        var misplaced = 0
        for round in 0..<20_000 {
            let element = elements[random.next(elements.count)]
            let index = round & 1 == 0 ? element.index : element.secondIndex
            let track: TickHeapTrack = round & 1 == 0 ? .first : .second
            if !heap.isTrackedEntry(at: index, of: element, as: track) { misplaced += 1 }
            heap.update(at: index, key: Ticks(random.next(10_000)), sequence: UInt64(300 + round), generation: 1)
        }
        #expect(misplaced == 0)
        #expect(heap.count == 2 * elements.count)
        #expect(elements.allSatisfy { heap.isTrackedEntry(at: $0.index, of: $0, as: .first) })
        #expect(elements.allSatisfy { heap.isTrackedEntry(at: $0.secondIndex, of: $0, as: .second) })
        #expect(elements.allSatisfy { !heap.isTrackedEntry(at: $0.secondIndex, of: $0, as: .first) })
        #expect(popAllCountingDisorder(&heap) == 0)
        #expect(elements.allSatisfy { $0.index == -1 && $0.secondIndex == -1 })
    }
}
