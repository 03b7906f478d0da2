import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

// The reference model the model tests check a real loop against (see ModelTests.swift).

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
        // An entry observer that stopped the run ends it before the first pass.
        if stopped {
            notify(.exit, in: mode)
            return .stopped
        }
        // 2.1 observers, 2.2 blocks, 2.3 custom sources (and the blocks they queued).
        notify(.beforeTimers, in: mode)
        notify(.beforeSources, in: mode)
        runBlocks(mode)
        let sourcesRan = performSources(mode, onlyOne: returnAfterSourceHandled)
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
    /// The signalled sources of `mode` by order, then signal time; `onlyOne`: the first only (a run
    /// that returns after a source), the others staying signalled.
    mutating func performSources(_ mode: Loop.Mode, onlyOne: Bool) -> Bool {
        var handled = false
        let ready = sources.indices
            .filter { isIn(sources[$0].member, mode) && sources[$0].signalled != nil }
            .sorted { (sources[$0].order, sources[$0].signalled!) < (sources[$1].order, sources[$1].signalled!) }
        for index in ready where sources[index].member.valid && sources[index].signalled != nil {
            if handled && onlyOne { break }
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
