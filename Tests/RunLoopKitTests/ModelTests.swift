import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

// Randomized model-based tests: seeded random sequences of operations on a real loop, checked
// step by step against a small reference model of SPEC §2 (which items are served in which mode,
// callout order, run results, nothing lost or run twice).
//
// A failure prints its seed; replay one with RUNLOOPKIT_MODEL_SEED=<seed> swift test --filter ModelTests.
// RUNLOOPKIT_MODEL_RUNS sets how many sequences run (default 2,000).

/// SplitMix64: small, seedable, good enough to pick operations.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The reference model: the loop's observable state, and what one run must do.
struct LoopModel {
    static let modes: [Loop.Mode] = [.default, .tracking, "a", "b"]
    static let addable: [Loop.Mode] = modes + [.common]

    enum Action: Equatable {
        case none
        case stop
        case signal(Int)
        case invalidate(Int)
        case nestedRun(Loop.Mode)
    }

    struct Source {
        var order: Int
        var modes: Set<Loop.Mode> = []
        var common = false
        var valid = true
        var signalled: UInt64? = nil
        var action: Action = .none
    }

    struct Block {
        var id: Int
        var modes: [Loop.Mode]
        var action: Action
    }

    var commonModes: Set<Loop.Mode> = [.default, .tracking]
    var sources: [Source] = []
    var blocks: [Block] = []
    var signalClock: UInt64 = 0
    var log: [String] = []
    var stopped = false

    func isIn(_ source: Source, _ mode: Loop.Mode) -> Bool {
        source.valid && source.modes.contains(mode)
    }

    /// As in CFRunLoop, `.common` expands to the common modes when an item is added or removed:
    /// each mode keeps one set, so removing from `.common` also removes an explicit membership.
    mutating func add(_ index: Int, to mode: Loop.Mode) {
        guard sources[index].valid else { return }
        if mode == .common {
            guard !sources[index].common else { return }
            sources[index].common = true
            sources[index].modes.formUnion(commonModes)
        } else {
            sources[index].modes.insert(mode)
        }
    }

    mutating func remove(_ index: Int, from mode: Loop.Mode) {
        if mode == .common {
            guard sources[index].common else { return }
            sources[index].common = false
            sources[index].modes.subtract(commonModes)
        } else {
            sources[index].modes.remove(mode)
        }
    }

    mutating func addCommonMode(_ mode: Loop.Mode) {
        guard commonModes.insert(mode).inserted else { return }
        for index in sources.indices where sources[index].valid && sources[index].common {
            sources[index].modes.insert(mode)
        }
    }

    func blockMatches(_ block: Block, _ mode: Loop.Mode) -> Bool {
        block.modes.contains(mode) || (block.modes.contains(.common) && commonModes.contains(mode))
    }

    func isEmpty(_ mode: Loop.Mode) -> Bool {
        if mode == .common { return true }
        return !sources.contains { isIn($0, mode) } && !blocks.contains { blockMatches($0, mode) }
    }

    mutating func signal(_ index: Int) {
        guard sources[index].valid, sources[index].signalled == nil else { return }
        signalClock += 1
        sources[index].signalled = signalClock
    }

    mutating func apply(_ action: Action) {
        switch action {
        case .none: break
        case .stop: stopped = true
        case .signal(let index): signal(index)
        case .invalidate(let index):
            sources[index].valid = false
            sources[index].signalled = nil
            sources[index].modes = []
            sources[index].common = false
        case .nestedRun(let mode): _ = run(mode, returnAfterSourceHandled: false)
        }
    }

    /// One poll-only run (zero timeout) or one iteration of a run that returns after a source:
    /// the expected result, or nil if the real loop would go to sleep.
    mutating func run(_ mode: Loop.Mode, returnAfterSourceHandled: Bool) -> Loop.RunResult? {
        if isEmpty(mode) { return .finished }
        let outerStopped = stopped
        stopped = false
        defer { stopped = outerStopped }
        log.append("enter \(mode.name)")
        runBlocks(mode)
        var handled = false
        let ready = sources.indices
            .filter { isIn(sources[$0], mode) && sources[$0].signalled != nil }
            .sorted { (sources[$0].order, sources[$0].signalled!) < (sources[$1].order, sources[$1].signalled!) }
        for index in ready where sources[index].valid && sources[index].signalled != nil {
            sources[index].signalled = nil
            log.append("source \(index)")
            handled = true
            apply(sources[index].action)
        }
        if handled { runBlocks(mode) }
        runBlocks(mode)
        log.append("exit \(mode.name)")
        if handled && returnAfterSourceHandled { return .handledSource }
        if !returnAfterSourceHandled { return .timedOut }  // zero timeout: the deadline has passed
        if stopped { return .stopped }
        if isEmpty(mode) { return .finished }
        return nil
    }

    mutating func runBlocks(_ mode: Loop.Mode) {
        let model = self
        let runnable = blocks.filter { model.blockMatches($0, mode) }
        blocks.removeAll { model.blockMatches($0, mode) }
        for block in runnable {
            log.append("block \(block.id)")
            apply(block.action)
        }
    }
}

/// The real loop driven by the same operations; its callouts are logged like the model's.
final class ModelHarness: @unchecked Sendable {
    let loop = Loop.current
    var sources: [LoopSource] = []
    var actions: [LoopModel.Action] = []
    var log: [String] = []

    func perform(_ action: LoopModel.Action) {
        switch action {
        case .none: break
        case .stop: loop.stop()
        case .signal(let index): sources[index].signal()
        case .invalidate(let index): sources[index].invalidate()
        case .nestedRun(let mode): loop.run(mode: mode, for: .zero)
        }
    }

    func addSource(order: Int, action: LoopModel.Action) {
        let index = sources.count
        let source = LoopSource(order: order) { [unowned self] in
            self.log.append("source \(index)")
            self.perform(self.actions[index])
        }
        sources.append(source)
        actions.append(action)
    }
}

@Suite struct ModelTests {
    static var runs: Int {
        Int(ProcessInfo.processInfo.environment["RUNLOOPKIT_MODEL_RUNS"] ?? "") ?? 2_000
    }

    static var seeds: [UInt64] {
        if let seed = ProcessInfo.processInfo.environment["RUNLOOPKIT_MODEL_SEED"].flatMap(UInt64.init) {
            return [seed]
        }
        return (0..<UInt64(runs)).map { 0x5EED_0000 + $0 }
    }

    @Test func randomSequencesMatchTheModel() {
        let failures = Recorder<String>()
        // Four threads share the seeds; each sequence runs on its own fresh loop.
        let seeds = Self.seeds
        let workers = 4
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            var index = worker
            while index < seeds.count {
                let seed = seeds[index]
                let failure = onFreshThread { Self.check(seed: seed) }
                if let failure { failures.append("seed \(seed) (RUNLOOPKIT_MODEL_SEED=\(seed)): \(failure)") }
                index += workers
            }
        }
        #expect(failures.events.isEmpty, "\(failures.events.prefix(3).joined(separator: "\n"))")
    }

    /// Runs one random sequence; returns a description of the first divergence, or nil.
    static func check(seed: UInt64) -> String? {
        var random = SeededGenerator(state: seed)
        var model = LoopModel()
        let real = ModelHarness()
        var blockCount = 0
        let steps = Int.random(in: 10...40, using: &random)

        func randomAction(_ random: inout SeededGenerator) -> LoopModel.Action {
            switch Int.random(in: 0..<10, using: &random) {
            case 0: return .stop
            case 1 where !model.sources.isEmpty: return .signal(Int.random(in: 0..<model.sources.count, using: &random))
            case 2 where !model.sources.isEmpty:
                return .invalidate(Int.random(in: 0..<model.sources.count, using: &random))
            case 3: return .nestedRun(LoopModel.modes.randomElement(using: &random)!)
            default: return .none
            }
        }

        for step in 0..<steps {
            let choice = Int.random(in: 0..<100, using: &random)
            switch choice {
            case 0..<15:  // a new source, added to a random mode
                let order = Int.random(in: 0...2, using: &random)
                let action = randomAction(&random)
                model.sources.append(LoopModel.Source(order: order, action: action))
                real.addSource(order: order, action: action)
                fallthrough
            case 15..<30 where !model.sources.isEmpty:  // add an existing source to a mode
                let index =
                    choice < 15 ? model.sources.count - 1 : Int.random(in: 0..<model.sources.count, using: &random)
                let mode = LoopModel.addable.randomElement(using: &random)!
                model.add(index, to: mode)
                real.loop.add(real.sources[index], forMode: mode)
            case 30..<37 where !model.sources.isEmpty:  // remove from a mode
                let index = Int.random(in: 0..<model.sources.count, using: &random)
                let mode = LoopModel.addable.randomElement(using: &random)!
                model.remove(index, from: mode)
                real.loop.remove(real.sources[index], forMode: mode)
            case 37..<55 where !model.sources.isEmpty:  // signal, here or from another thread
                let index = Int.random(in: 0..<model.sources.count, using: &random)
                model.signal(index)
                let source = real.sources[index]
                if Bool.random(using: &random) {
                    source.signal()
                } else {
                    let done = DispatchSemaphore(value: 0)
                    Thread {
                        source.signal()
                        done.signal()
                    }.start()
                    done.wait()
                }
            case 55..<60 where !model.sources.isEmpty:  // invalidate, here or from another thread
                let index = Int.random(in: 0..<model.sources.count, using: &random)
                model.apply(.invalidate(index))
                let source = real.sources[index]
                if Bool.random(using: &random) {
                    source.invalidate()
                } else {
                    let done = DispatchSemaphore(value: 0)
                    Thread {
                        source.invalidate()
                        done.signal()
                    }.start()
                    done.wait()
                }
            case 60..<75:  // a block for random modes, from this thread or another
                blockCount += 1
                let id = blockCount
                var modes = Array(
                    Set(
                        (0..<Int.random(in: 1...2, using: &random)).map { _ in
                            LoopModel.addable.randomElement(using: &random)!
                        }))
                modes.sort { $0.name < $1.name }
                let action = randomAction(&random)
                model.blocks.append(LoopModel.Block(id: id, modes: modes, action: action))
                let blockModes = modes
                let harness = real
                let body: @Sendable () -> Void = {
                    harness.log.append("block \(id)")
                    harness.perform(action)
                }
                if Bool.random(using: &random) {
                    real.loop.perform(inModes: modes, body)
                } else {
                    let done = DispatchSemaphore(value: 0)
                    Thread {
                        harness.loop.perform(inModes: blockModes, body)
                        done.signal()
                    }.start()
                    done.wait()
                }
            case 75..<78:  // a custom mode joins the common set
                let mode = ["a", "b"].randomElement(using: &random)!
                model.addCommonMode(Loop.Mode(mode))
                real.loop.addCommonMode(Loop.Mode(mode))
            default:  // run a mode
                let mode = (LoopModel.modes + [.common]).randomElement(using: &random)!
                var returnAfter = Bool.random(using: &random)
                var probe = model
                if returnAfter && probe.run(mode, returnAfterSourceHandled: true) == nil {
                    returnAfter = false  // the real loop would sleep: poll instead
                }
                model.log = []
                let expected = model.run(mode, returnAfterSourceHandled: returnAfter)
                let observer = ModelObserver(real)
                real.loop.add(observer.observer, forMode: .common)
                for extra in ["a", "b"] where !model.commonModes.contains(Loop.Mode(extra)) {
                    real.loop.add(observer.observer, forMode: Loop.Mode(extra))
                }
                let result = real.loop.run(
                    mode: mode, for: returnAfter ? .seconds(5) : .zero, returnAfterSourceHandled: returnAfter)
                observer.observer.invalidate()
                if result != expected {
                    return "step \(step): run(\(mode.name)) returned \(result), model says \(expected!)"
                }
                if real.log != model.log {
                    return "step \(step): run(\(mode.name)) callouts \(real.log), model says \(model.log)"
                }
            }
        }
        // Nothing lost: every block the model still holds is still pending in the loop, and runs
        // exactly once when its mode runs.
        for mode in LoopModel.modes {
            model.log = []
            let expected = model.run(mode, returnAfterSourceHandled: false)
            let observer = ModelObserver(real)
            real.loop.add(observer.observer, forMode: .common)
            for extra in ["a", "b"] { real.loop.add(observer.observer, forMode: Loop.Mode(extra)) }
            let result = real.loop.run(mode: mode, for: .zero)
            observer.observer.invalidate()
            if result != expected || real.log != model.log {
                return "final run(\(mode.name)): \(result) \(real.log), model says \(expected!) \(model.log)"
            }
        }
        return nil
    }
}

/// Logs entry and exit of every run (nested ones included) into the harness's log, and resets
/// both logs at the outermost entry so that each top-level run is compared on its own.
final class ModelObserver {
    let observer: LoopObserver

    init(_ harness: ModelHarness) {
        harness.log = []
        observer = LoopObserver(activities: [.entry, .exit]) { _, activity in
            let mode = harness.loop.currentMode?.name ?? "?"
            harness.log.append(activity == .entry ? "enter \(mode)" : "exit \(mode)")
        }
    }
}
