import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

/// Adding and removing items costs O(1) or O(log n) each, however many a mode holds: a mode of
/// 50,000 items takes about ten times as long as one of 5,000 to fill, search and empty, where a linear
/// removal (or a debug check walking the tables) would take a hundred times as long. Items go to
/// a running `LoopThread`'s loop in the mode it runs, from one thread and from 20, and leave in
/// random order. Each test measures both sizes itself, the best of three runs each, so a loaded
/// machine or a sanitizer slows both alike.
@Suite(.serialized) struct ItemScaleTests {
    static let small = 5_000
    static let large = 50_000
    /// Linear growth gives about 10 and quadratic about 100: a bound between them, with room for
    /// the cache misses of a larger table.
    static let bound = 40.0

    @Test(arguments: [ScaleKind.sources, .timers, .observers], [1, 20] as [Int])
    func fillingAndEmptyingAModeGrowsLinearly(_ kind: ScaleKind, threads: Int) {
        let thread = LoopThread(name: "scale")
        defer { thread.stop() }
        let loop = thread.loop
        let smallTime = ItemScaleTests.best(of: 3) {
            kind.fillAndEmpty(loop, count: ItemScaleTests.small, threads: threads)
        }
        let largeTime = ItemScaleTests.best(of: 3) {
            kind.fillAndEmpty(loop, count: ItemScaleTests.large, threads: threads)
        }
        let ratio = largeTime / smallTime
        #expect(
            ratio < ItemScaleTests.bound,
            """
            \(kind), \(threads) thread(s): \(ItemScaleTests.large) items took \(largeTime) ms, \
            \(ItemScaleTests.small) took \(smallTime) ms (× \(ratio); linear is about 10)
            """)
    }

    static func best(of runs: Int, _ body: () -> Double) -> Double {
        (0..<runs).map { _ in body() }.min()!
    }
}

enum ScaleKind: String, CaseIterable, Sendable {
    case sources, timers, observers

    /// Makes `count` items, then (timed) adds them to `loop`'s default mode from `threads`
    /// threads, finds each there and invalidates them, both in random order; milliseconds.
    func fillAndEmpty(_ loop: Loop, count: Int, threads: Int) -> Double {
        let items = makeItems(count)
        let order = Array(0..<count).shuffled()
        let missing = SharedCount()
        let start = ContinuousClock.now
        inParallel(threads) { index in
            for item in stride(from: index, to: count, by: threads) { add(items[item], to: loop) }
        }
        inParallel(threads) { index in
            for item in stride(from: index, to: count, by: threads) where !contains(items[order[item]], in: loop) {
                missing.add(1)
            }
        }
        inParallel(threads) { index in
            for item in stride(from: index, to: count, by: threads) { invalidate(items[order[item]]) }
        }
        let elapsed = milliseconds(since: start)
        precondition(missing.value == 0, "\(missing.value) of \(count) \(self) were not found in the mode")
        return elapsed
    }

    private func contains(_ item: AnyObject, in loop: Loop) -> Bool {
        switch item {
        case let source as LoopSource: loop.contains(source, inMode: .default)
        case let timer as LoopTimer: loop.contains(timer, inMode: .default)
        case let observer as LoopObserver: loop.contains(observer, inMode: .default)
        default: preconditionFailure("not an item")
        }
    }

    private func makeItems(_ count: Int) -> [AnyObject & Sendable] {
        switch self {
        case .sources: return (0..<count).map { _ in LoopSource {} }
        case .timers: return (0..<count).map { index in LoopTimer(after: .seconds(600 + index % 97)) { _ in } }
        case .observers:
            return (0..<count).map { index in LoopObserver(activities: .exit, order: index % 3) { _, _ in } }
        }
    }

    private func add(_ item: AnyObject, to loop: Loop) {
        switch item {
        case let source as LoopSource: loop.add(source, forMode: .default)
        case let timer as LoopTimer: loop.add(timer, forMode: .default)
        case let observer as LoopObserver: loop.add(observer, forMode: .default)
        default: preconditionFailure("not an item")
        }
    }

    private func invalidate(_ item: AnyObject) {
        switch item {
        case let source as LoopSource: source.invalidate()
        case let timer as LoopTimer: timer.invalidate()
        case let observer as LoopObserver: observer.invalidate()
        default: preconditionFailure("not an item")
        }
    }
}

/// Runs `body(0..<count)` on `count` threads at once and waits for them all.
func inParallel(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    guard count > 1 else { return body(0) }
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread {
            body(index)
            done.leave()
        }.start()
    }
    done.wait()
}
