import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

// Randomized model-based tests: seeded random sequences of operations on a real loop (custom
// sources, timers, ports, blocks, observers, common modes, stops and nested runs, from the loop's
// thread and others), checked step by step against a small reference model of SPEC §2 (which
// items are served in which mode, callout order, run results, nothing lost or run twice).
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
    static let activities: [Loop.Activity] = [
        .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
    ]
    /// A repeating timer's interval, in milliseconds. Fire dates are either well in the past (due
    /// at once) or hours ahead (never due during a test), so what fires in a run does not depend on
    /// how fast the machine is; after firing from a past date, a repeating timer's next fire date
    /// is an hour ahead, so it fires at most once per run.
    static let timerInterval = 3_600_000

    enum Action: Equatable {
        case none
        case stop
        case signal(Int)
        case invalidate(Item)
        case send(Int)
        case nestedRun(Loop.Mode)
        /// Post to a port, then run the loop (as a callout waiting for an answer would).
        case sendThenRun(Int, Loop.Mode)
    }

    enum Item: Equatable {
        case source(Int)
        case timer(Int)
        case port(Int)
        case observer(Int)

        /// Observers do not keep a mode alive.
        var keepsModeAlive: Bool {
            if case .observer = self { return false }
            return true
        }
    }

    /// The modes an item is in. As in CFRunLoop, `.common` expands to the common modes when an
    /// item is added or removed: each mode keeps one set, so removing from `.common` also removes
    /// an explicit membership.
    struct Membership {
        var modes: Set<Loop.Mode> = []
        var common = false
        var valid = true
        /// When the item joined each of its modes, and `.common`: observers of equal order are
        /// called in the order they joined the mode, and items join a mode added to the common set
        /// in the order they joined `.common`.
        var joined: [Loop.Mode: UInt64] = [:]
    }

    struct Source {
        var order: Int
        var member = Membership()
        var signalled: UInt64? = nil
        var action: Action = .none
    }

    struct Timer {
        var repeats: Bool
        /// Milliseconds from the harness's origin: negative is due, positive is not.
        var fireDate: Int
        var member = Membership()
        /// Firing timers are not re-entered by nested runs.
        var firing = false
        var action: Action = .none
    }

    struct Observer {
        var activities: Loop.Activity
        var repeats: Bool
        var order: Int
        var member = Membership()
        /// Running observers are not re-entered by nested runs.
        var running = false
        var action: Action = .none
    }

    struct Port {
        var member = Membership()
        /// Undelivered message ids, in send order.
        var messages: [Int] = []
        /// When the first message since the port's last batch began was sent (on the signal clock):
        /// ready ports are served in that order.
        var readySince: UInt64? = nil
    }

    struct Block {
        var id: Int
        var modes: [Loop.Mode]
        var action: Action
    }

    var commonModes: Set<Loop.Mode> = [.default, .tracking]
    var items: [Item] = []
    var sources: [Source] = []
    var timers: [Timer] = []
    var ports: [Port] = []
    var observers: [Observer] = []
    /// Stamps `Membership.joined`.
    var joinClock: UInt64 = 0
    /// The action each message carries, by message id.
    var messageActions: [Action] = []
    var blocks: [Block] = []
    var signalClock: UInt64 = 0
    var log: [String] = []
    var stopped = false

    subscript(member item: Item) -> Membership {
        get {
            switch item {
            case .source(let index): sources[index].member
            case .timer(let index): timers[index].member
            case .port(let index): ports[index].member
            case .observer(let index): observers[index].member
            }
        }
        set {
            switch item {
            case .source(let index): sources[index].member = newValue
            case .timer(let index): timers[index].member = newValue
            case .port(let index): ports[index].member = newValue
            case .observer(let index): observers[index].member = newValue
            }
        }
    }

    func isIn(_ member: Membership, _ mode: Loop.Mode) -> Bool {
        member.valid && member.modes.contains(mode)
    }

    func isDue(_ timer: Timer) -> Bool {
        timer.member.valid && timer.fireDate < 0 && !timer.firing
    }

    mutating func setAction(_ action: Action, of item: Item) {
        switch item {
        case .source(let index): sources[index].action = action
        case .timer(let index): timers[index].action = action
        case .observer(let index): observers[index].action = action
        case .port: break  // a port's messages carry the actions
        }
    }

    /// Puts `member` in `mode` (a real mode, or `.common` for the common flag's stamp); one already
    /// there keeps its place.
    mutating func join(_ member: inout Membership, _ mode: Loop.Mode) {
        guard member.joined[mode] == nil else { return }
        joinClock += 1
        member.joined[mode] = joinClock
        if mode != .common { member.modes.insert(mode) }
    }

    mutating func add(_ item: Item, to mode: Loop.Mode) {
        var member = self[member: item]
        guard member.valid else { return }
        if mode == .common {
            guard !member.common else { return }
            member.common = true
            join(&member, .common)
            for common in commonModes { join(&member, common) }
        } else {
            join(&member, mode)
        }
        self[member: item] = member
    }

    mutating func remove(_ item: Item, from mode: Loop.Mode) {
        var member = self[member: item]
        let left: Set<Loop.Mode>
        if mode == .common {
            guard member.common else { return }
            member.common = false
            left = commonModes.union([.common])
        } else {
            left = [mode]
        }
        member.modes.subtract(left)
        for mode in left { member.joined[mode] = nil }
        self[member: item] = member
    }

    mutating func addCommonMode(_ mode: Loop.Mode) {
        guard commonModes.insert(mode).inserted else { return }
        let joining = items.filter { self[member: $0].valid && self[member: $0].common }
            .sorted { self[member: $0].joined[.common]! < self[member: $1].joined[.common]! }
        for item in joining {
            var member = self[member: item]
            join(&member, mode)
            self[member: item] = member
        }
    }

    func blockMatches(_ block: Block, _ mode: Loop.Mode) -> Bool {
        block.modes.contains(mode) || (block.modes.contains(.common) && commonModes.contains(mode))
    }

    /// Sources, timers and ports keep a mode alive while valid (a port with no messages too);
    /// observers do not.
    func isEmpty(_ mode: Loop.Mode) -> Bool {
        if mode == .common { return true }
        return !items.contains { $0.keepsModeAlive && isIn(self[member: $0], mode) }
            && !blocks.contains { blockMatches($0, mode) }
    }

    mutating func signal(_ index: Int) {
        guard sources[index].member.valid, sources[index].signalled == nil else { return }
        signalClock += 1
        sources[index].signalled = signalClock
    }

    /// Queues a message (dropped by an invalidated port); returns its id.
    @discardableResult
    mutating func send(_ index: Int, action: Action) -> Int {
        let id = messageActions.count
        messageActions.append(action)
        guard ports[index].member.valid else { return id }
        ports[index].messages.append(id)
        if ports[index].readySince == nil {
            signalClock += 1
            ports[index].readySince = signalClock
        }
        return id
    }

    mutating func invalidate(_ item: Item) {
        self[member: item] = Membership(valid: false)
        switch item {
        case .source(let index): sources[index].signalled = nil
        case .timer, .observer: break
        case .port(let index):
            ports[index].messages = []
            ports[index].readySince = nil
        }
    }

    mutating func apply(_ action: Action) {
        switch action {
        case .none: break
        case .stop: stopped = true
        case .signal(let index): signal(index)
        case .invalidate(let item): invalidate(item)
        case .send(let index): send(index, action: .none)
        case .nestedRun(let mode): _ = run(mode, returnAfterSourceHandled: false)
        case .sendThenRun(let index, let mode):
            send(index, action: .none)
            _ = run(mode, returnAfterSourceHandled: false)
        }
    }

    /// One poll-only run (zero timeout) or one iteration of a run that returns after a source:
    /// the expected result, or nil if the real loop would go to sleep.
    mutating func run(_ mode: Loop.Mode, returnAfterSourceHandled: Bool) -> Loop.RunResult? {
        if isEmpty(mode) { return .finished }
        let outerStopped = stopped
        stopped = false
        defer { stopped = outerStopped }
        notify(.entry, in: mode)
        // 2.1 observers, 2.2 blocks, 2.3 custom sources (and the blocks they queued).
        notify(.beforeTimers, in: mode)
        notify(.beforeSources, in: mode)
        runBlocks(mode)
        let sourcesRan = performSources(mode)
        if sourcesRan { runBlocks(mode) }
        // 2.5 due timers (not a handled source), then ports (a handled source); 2.6 blocks.
        fireTimers(mode)
        let portsServed = servePorts(mode)
        let handled = sourcesRan || portsServed
        runBlocks(mode)
        // The result is settled before the exit observers run: a stop from one of them is lost.
        let result: Loop.RunResult
        if handled && returnAfterSourceHandled {
            result = .handledSource
        } else if !returnAfterSourceHandled {
            result = .timedOut  // zero timeout: the deadline has passed
        } else if stopped {
            result = .stopped
        } else if isEmpty(mode) {
            result = .finished
        } else {
            return nil
        }
        notify(.exit, in: mode)
        return result
    }

    /// The observers of `mode` watching `activity`, taken once (as the loop does), by order, then
    /// by when they joined the mode. The entry/exit logging observer has order 0 and is added just
    /// before each top-level run, so it comes last among order-0 ties. One invalidated meanwhile, or
    /// running (this is a nested run inside its callout), is skipped; a non-repeating one
    /// invalidates itself after its callout.
    mutating func notify(_ activity: Loop.Activity, in mode: Loop.Mode) {
        var called: [(order: Int, joined: UInt64, index: Int?)] = observers.indices
            .filter { isIn(observers[$0].member, mode) && observers[$0].activities.contains(activity) }
            .map { (observers[$0].order, observers[$0].member.joined[mode]!, $0) }
        if activity == .entry || activity == .exit { called.append((0, .max, nil)) }
        called.sort { ($0.order, $0.joined) < ($1.order, $1.joined) }
        for (_, _, index) in called {
            guard let index else {
                log.append(activity == .entry ? "enter \(mode.name)" : "exit \(mode.name)")
                continue
            }
            guard observers[index].member.valid, !observers[index].running else { continue }
            observers[index].running = true
            log.append("observer \(index) \(activity)")
            apply(observers[index].action)
            observers[index].running = false
            if !observers[index].repeats { invalidate(.observer(index)) }
        }
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

    /// Signalled sources by order, then signal time; a source run meanwhile (by a nested run) or
    /// invalidated is skipped. Returns whether any ran.
    mutating func performSources(_ mode: Loop.Mode) -> Bool {
        var handled = false
        let ready = sources.indices
            .filter { isIn(sources[$0].member, mode) && sources[$0].signalled != nil }
            .sorted { (sources[$0].order, sources[$0].signalled!) < (sources[$1].order, sources[$1].signalled!) }
        for index in ready where sources[index].member.valid && sources[index].signalled != nil {
            sources[index].signalled = nil
            log.append("source \(index)")
            handled = true
            apply(sources[index].action)
        }
        return handled
    }

    /// Due timers in fire-date order. One that fired meanwhile (in a nested run), is firing, or was
    /// invalidated is skipped. A one-shot timer invalidates itself after its callout; a repeating
    /// one moves on by its interval. Returns whether any fired.
    @discardableResult
    mutating func fireTimers(_ mode: Loop.Mode) -> Bool {
        let due = timers.indices
            .filter { isIn(timers[$0].member, mode) && isDue(timers[$0]) }
            .sorted { timers[$0].fireDate < timers[$1].fireDate }
        var fired = false
        for index in due where isDue(timers[index]) {
            timers[index].firing = true
            fired = true
            log.append("timer \(index)")
            apply(timers[index].action)
            timers[index].firing = false
            if !timers[index].repeats {
                invalidate(.timer(index))
            } else if timers[index].member.valid {
                timers[index].fireDate += LoopModel.timerInterval
            }
        }
        return fired
    }

    /// Ports with messages, in the order they became ready. Each delivers, in send order, the
    /// messages queued when its turn comes (ones sent meanwhile wait for the next pass); a nested
    /// run in one of those callouts, in a mode holding the port, goes on with the messages still
    /// queued, so that delivery stays in send order. An invalidated port delivers no more. Returns
    /// whether any port delivered. Ports whose delivery is under way (a nested run inside one of
    /// their callouts) come first, among themselves in the order they joined the mode.
    mutating func servePorts(_ mode: Loop.Mode) -> Bool {
        let ready = ports.indices
            .filter { isIn(ports[$0].member, mode) && !ports[$0].messages.isEmpty }
            .sorted {
                (ports[$0].readySince ?? 0, ports[$0].member.joined[mode]!)
                    < (ports[$1].readySince ?? 0, ports[$1].member.joined[mode]!)
            }
        var handled = false
        for index in ready where ports[index].member.valid && !ports[index].messages.isEmpty {
            let last = ports[index].messages.last!
            ports[index].readySince = nil
            handled = true
            while ports[index].member.valid, let message = ports[index].messages.first, message <= last {
                ports[index].messages.removeFirst()
                log.append("port \(index): \(message)")
                apply(messageActions[message])
            }
        }
        return handled
    }
}

/// The real loop driven by the same operations; its callouts are logged like the model's.
final class ModelHarness: @unchecked Sendable {
    let loop = Loop.current
    /// The instant the model's fire dates count from.
    let origin = ContinuousClock.now
    var sources: [LoopSource] = []
    var timers: [LoopTimer] = []
    var ports: [LoopPort<Int>] = []
    var observers: [LoopObserver] = []
    var sourceActions: [LoopModel.Action] = []
    var timerActions: [LoopModel.Action] = []
    var observerActions: [LoopModel.Action] = []
    var messageActions: [LoopModel.Action] = []
    var log: [String] = []

    func perform(_ action: LoopModel.Action) {
        switch action {
        case .none: break
        case .stop: loop.stop()
        case .signal(let index): sources[index].signal()
        case .invalidate(let item): invalidator(item)()
        case .send(let index): sender(index, action: .none)()
        case .nestedRun(let mode): loop.run(mode: mode, for: .zero)
        case .sendThenRun(let index, let mode):
            sender(index, action: .none)()
            loop.run(mode: mode, for: .zero)
        }
    }

    func addSource(order: Int) {
        let index = sources.count
        let source = LoopSource(order: order) { [unowned self] in
            self.log.append("source \(index)")
            self.perform(self.sourceActions[index])
        }
        sources.append(source)
        sourceActions.append(.none)
    }

    func addTimer(repeats: Bool, fireDate: Int) {
        let index = timers.count
        let timer = LoopTimer(
            fireAt: date(fireDate), interval: repeats ? .milliseconds(LoopModel.timerInterval) : nil
        ) { [unowned self] _ in
            self.log.append("timer \(index)")
            self.perform(self.timerActions[index])
        }
        timers.append(timer)
        timerActions.append(.none)
    }

    func addPort() {
        let index = ports.count
        let port = LoopPort<Int> { [unowned self] message in
            self.log.append("port \(index): \(message)")
            self.perform(self.messageActions[message])
        }
        ports.append(port)
    }

    func addObserver(activities: Loop.Activity, repeats: Bool, order: Int) {
        let index = observers.count
        let observer = LoopObserver(activities: activities, repeats: repeats, order: order) {
            [unowned self] _, activity in
            self.log.append("observer \(index) \(activity)")
            self.perform(self.observerActions[index])
        }
        observers.append(observer)
        observerActions.append(.none)
    }

    func date(_ milliseconds: Int) -> ContinuousClock.Instant {
        origin + .milliseconds(milliseconds)
    }

    func setAction(_ action: LoopModel.Action, of item: LoopModel.Item) {
        switch item {
        case .source(let index): sourceActions[index] = action
        case .timer(let index): timerActions[index] = action
        case .observer(let index): observerActions[index] = action
        case .port: break
        }
    }

    func add(_ item: LoopModel.Item, to mode: Loop.Mode) {
        switch item {
        case .source(let index): loop.add(sources[index], forMode: mode)
        case .timer(let index): loop.add(timers[index], forMode: mode)
        case .port(let index): loop.add(ports[index], forMode: mode)
        case .observer(let index): loop.add(observers[index], forMode: mode)
        }
    }

    func remove(_ item: LoopModel.Item, from mode: Loop.Mode) {
        switch item {
        case .source(let index): loop.remove(sources[index], forMode: mode)
        case .timer(let index): loop.remove(timers[index], forMode: mode)
        case .port(let index): loop.remove(ports[index], forMode: mode)
        case .observer(let index): loop.remove(observers[index], forMode: mode)
        }
    }

    /// Invalidating `item`, to do here or on another thread.
    func invalidator(_ item: LoopModel.Item) -> @Sendable () -> Void {
        switch item {
        case .source(let index): return { [source = sources[index]] in source.invalidate() }
        case .timer(let index): return { [timer = timers[index]] in timer.invalidate() }
        case .port(let index): return { [port = ports[index]] in port.invalidate() }
        case .observer(let index): return { [observer = observers[index]] in observer.invalidate() }
        }
    }

    /// Sending a new message carrying `action`, to do here or on another thread. The message id
    /// is allocated now, in the same order as the model's.
    func sender(_ index: Int, action: LoopModel.Action) -> @Sendable () -> Void {
        let id = messageActions.count
        messageActions.append(action)
        return { [port = ports[index]] in port.send(id) }
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

/// Logs entry and exit of every run (nested ones included) into the harness's log, and resets
/// both logs at the outermost entry so that each top-level run is compared on its own. It has the
/// default order, 0, and is added to every mode just before each top-level run: the last of the
/// order-0 observers in each, which is where the model calls it.
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
