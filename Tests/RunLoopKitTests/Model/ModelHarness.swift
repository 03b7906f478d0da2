import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

// Drives a real loop through a random sequence and records what it did, for ModelTests.swift.

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
