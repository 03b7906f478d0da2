import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

// Randomized model-based tests: seeded random sequences of operations on a real loop (custom
// sources, timers, ports, blocks, observers, common modes, stops and nested runs, from the loop's
// thread and others), checked step by step against a small reference model of the run-loop semantics (docs/Design.md:
// which items are served in which mode, callout order, run results, nothing lost or run twice).
//
// Observers are random items too: random activities, repeating or not, and a few `order` values
// so that ties happen (with each other and with the entry/exit logging observer). The model checks
// that a mode's observers are called in ascending order, ties in the order they joined that mode
// (items joining a mode added to the common set later keep the order they joined `.common` in);
// that a non-repeating observer is called once; that a running observer is skipped by the nested
// runs of its own callout; that invalidation (from the loop thread, another thread, a callout, or
// the observer's own callout) takes effect at once; and that observers do not keep a mode alive.
// Runs never sleep, so no observer may be called for `beforeWaiting` or `afterWaiting`.
//
// A failure prints its seed; replay one with RUNLOOPKIT_MODEL_SEED=<seed> swift test --filter ModelTests.
// RUNLOOPKIT_MODEL_RUNS sets how many sequences run (default 2,000).

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

    /// Runs `body` here or on another thread; from another thread it is waited for before the
    /// sequence goes on, so that the next step sees its effect.
    static func onThread(here: Bool, _ body: @escaping @Sendable () -> Void) {
        guard !here else {
            body()
            return
        }
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            body()
            done.signal()
        }
        done.wait()
    }

    /// Runs one random sequence; returns a description of the first divergence, or nil.
    static func check(seed: UInt64) -> String? {
        var random = SeededGenerator(state: seed)
        var model = LoopModel()
        let real = ModelHarness()
        var blockCount = 0
        var usedDates: Set<Int> = []
        let steps = Int.random(in: 10...40, using: &random)

        func randomAction(_ random: inout SeededGenerator) -> LoopModel.Action {
            switch Int.random(in: 0..<15, using: &random) {
            case 0: return .stop
            case 1 where !model.sources.isEmpty: return .signal(Int.random(in: 0..<model.sources.count, using: &random))
            case 2 where !model.items.isEmpty: return .invalidate(model.items.randomElement(using: &random)!)
            case 3: return .nestedRun(LoopModel.modes.randomElement(using: &random)!)
            case 4 where !model.ports.isEmpty: return .send(Int.random(in: 0..<model.ports.count, using: &random))
            case 5 where !model.ports.isEmpty:
                let port = Int.random(in: 0..<model.ports.count, using: &random)
                return .sendThenRun(port, LoopModel.modes.randomElement(using: &random)!)
            default: return .none
            }
        }

        // A fire date well in the past (due now; distinct, so the fire-date order is defined) or
        // hours ahead (never due during the test), in milliseconds from the harness's origin.
        func randomFireDate(_ random: inout SeededGenerator) -> Int {
            guard Int.random(in: 0..<4, using: &random) > 0 else {
                return Int.random(in: 2...4, using: &random) * LoopModel.timerInterval
            }
            var date: Int
            repeat {
                date = -Int.random(in: 1_000...60_000, using: &random)
            } while !usedDates.insert(date).inserted
            return date
        }

        for step in 0..<steps {
            var choice = Int.random(in: 0..<100, using: &random)
            // With nothing to act on yet, make something rather than run an empty loop.
            if model.items.isEmpty && (18..<64).contains(choice) { choice = 0 }
            switch choice {
            case 0..<18:  // a new source, timer, port or observer, added to a random mode
                let item: LoopModel.Item
                switch Int.random(in: 0..<16, using: &random) {
                case 0..<4:
                    let order = Int.random(in: 0...2, using: &random)
                    item = .source(model.sources.count)
                    model.sources.append(LoopModel.Source(order: order))
                    real.addSource(order: order)
                case 4..<7:
                    let repeats = Bool.random(using: &random)
                    let fireDate = randomFireDate(&random)
                    item = .timer(model.timers.count)
                    model.timers.append(LoopModel.Timer(repeats: repeats, fireDate: fireDate))
                    real.addTimer(repeats: repeats, fireDate: fireDate)
                case 7..<10:
                    item = .port(model.ports.count)
                    model.ports.append(LoopModel.Port())
                    real.addPort()
                default:
                    // Waiting activities included: they must never be called, as runs never sleep.
                    var activities: Loop.Activity = []
                    for activity in LoopModel.activities where Int.random(in: 0..<3, using: &random) > 0 {
                        activities.insert(activity)
                    }
                    if activities.isEmpty { activities = .allActivities }
                    let repeats = Bool.random(using: &random)
                    // Orders around the logging observer's 0, so that ties with it happen too.
                    let order = Int.random(in: -1...1, using: &random)
                    item = .observer(model.observers.count)
                    model.observers.append(LoopModel.Observer(activities: activities, repeats: repeats, order: order))
                    real.addObserver(activities: activities, repeats: repeats, order: order)
                }
                // Chosen once the item exists, so that it may act on itself (a timer or an observer
                // invalidating itself from its own handler, a source signalling itself).
                model.items.append(item)
                var action = randomAction(&random)
                // A repeating observer signalling a source whose callout runs the loop again would
                // recurse without end (each nested run calls the observer, which signals the source
                // again): only one-shot observers signal.
                if case .observer(let index) = item, model.observers[index].repeats, case .signal = action {
                    action = .none
                }
                model.setAction(action, of: item)
                real.setAction(action, of: item)
                fallthrough
            case 18..<30 where !model.items.isEmpty:  // add an existing item to a mode
                let item = choice < 18 ? model.items.last! : model.items.randomElement(using: &random)!
                let mode = LoopModel.addable.randomElement(using: &random)!
                model.add(item, to: mode)
                real.add(item, to: mode)
            case 30..<36 where !model.items.isEmpty:  // remove from a mode
                let item = model.items.randomElement(using: &random)!
                let mode = LoopModel.addable.randomElement(using: &random)!
                model.remove(item, from: mode)
                real.remove(item, from: mode)
            case 36..<46 where !model.sources.isEmpty:  // signal, here or from another thread
                let index = Int.random(in: 0..<model.sources.count, using: &random)
                model.signal(index)
                let source = real.sources[index]
                onThread(here: Bool.random(using: &random)) { source.signal() }
            case 46..<54 where !model.ports.isEmpty:  // a few messages, here or from another thread
                let index = Int.random(in: 0..<model.ports.count, using: &random)
                var sends: [@Sendable () -> Void] = []
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let action = randomAction(&random)
                    model.send(index, action: action)
                    sends.append(real.sender(index, action: action))
                }
                let batch = sends
                onThread(here: Bool.random(using: &random)) {
                    for send in batch { send() }
                }
            case 54..<59 where !model.timers.isEmpty:  // re-arm a timer, here or from another thread
                let index = Int.random(in: 0..<model.timers.count, using: &random)
                let fireDate = randomFireDate(&random)
                if model.timers[index].member.valid { model.timers[index].fireDate = fireDate }
                let (timer, date) = (real.timers[index], real.date(fireDate))
                onThread(here: Bool.random(using: &random)) { timer.fireDate = date }
            case 59..<64 where !model.items.isEmpty:  // invalidate, here or from another thread
                let item = model.items.randomElement(using: &random)!
                model.invalidate(item)
                onThread(here: Bool.random(using: &random), real.invalidator(item))
            case 64..<76:  // a block for random modes, from this thread or another
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
                onThread(here: Bool.random(using: &random)) { harness.loop.perform(inModes: blockModes, body) }
            case 76..<79:  // a custom mode joins the common set
                let mode = ["a", "b"].randomElement(using: &random)!
                model.addCommonMode(Loop.Mode(mode))
                real.loop.addCommonMode(Loop.Mode(mode))
            default:  // run a mode
                // Mostly a mode with something to serve; sometimes any (an empty one, `.common`).
                let busy = LoopModel.modes.filter { !model.isEmpty($0) }
                let mode =
                    Int.random(in: 0..<4, using: &random) > 0 && !busy.isEmpty
                    ? busy.randomElement(using: &random)! : (LoopModel.modes + [.common]).randomElement(using: &random)!
                var returnAfter = Bool.random(using: &random)
                var probe = model
                if returnAfter && probe.run(mode, returnAfterSourceHandled: true) == nil {
                    returnAfter = false  // the real loop would sleep: poll instead
                }
                var next = model
                next.log = []
                let expected = next.run(mode, returnAfterSourceHandled: returnAfter)
                model = next
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
        // Nothing lost: every block, signal, due timer and message the model still holds is still
        // pending in the loop, and is served exactly once when its mode runs.
        for mode in LoopModel.modes {
            var next = model
            next.log = []
            let expected = next.run(mode, returnAfterSourceHandled: false)
            model = next
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
