import Testing

@testable import RunLoopKit

private let sixActivities: [Loop.Activity] = [
    .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
]

/// The activities of a run that serves one one-shot timer after one sleep, then finds its mode
/// empty: each happens exactly once, in this order.
private let oneSleepRun = ["entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit"]

/// Runs `.default` with one one-shot timer due in 100 ms (the `oneSleepRun` sequence): far enough
/// that the run's first pass finds it not yet due and sleeps, even on a loaded machine (10 ms was
/// once due before the loop got to sleep).
private func runWithOneTimer(_ loop: Loop) -> Loop.RunResult {
    loop.add(LoopTimer(after: .milliseconds(100)) { _ in }, forMode: .default)
    return loop.run(mode: .default, for: .seconds(5))
}

/// Observers: the phase sequences of a run, activity selection, ordering, one-shot observers,
/// nested runs, invalidation, and observers not keeping a mode alive.
@Suite struct ObserverTests {
    // MARK: Sequences

    @Test func idleRunThatTimesOut() throws {
        let events = Recorder<String>()
        let result = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            let observer = LoopObserver(activities: .allActivities) { _, activity in
                events.append(activity.description)
            }
            loop.add(observer, forMode: .default)
            return loop.run(mode: .default, for: .milliseconds(30))
        }
        #expect(result == .timedOut)
        // entry, then one or more sleeping iterations, then exit.
        let sequence = events.events
        try #require(sequence.count >= 6)
        #expect(sequence.first == "entry")
        #expect(sequence.last == "exit")
        let iterations = Array(sequence.dropFirst().dropLast())
        let cycle = ["beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting"]
        #expect(iterations.count % cycle.count == 0)
        for start in stride(from: 0, to: iterations.count - cycle.count + 1, by: cycle.count) {
            #expect(Array(iterations[start..<start + cycle.count]) == cycle)
        }
    }

    @Test func signalledSourceRunsWithoutSleeping() {
        let events = Recorder<String>()
        let result = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { events.append("source") }
            loop.add(source, forMode: .default)
            let observer = LoopObserver(activities: .allActivities) { _, activity in
                events.append(activity.description)
            }
            loop.add(observer, forMode: .default)
            source.signal()
            return loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
        }
        #expect(result == .handledSource)
        #expect(events.events == ["entry", "beforeTimers", "beforeSources", "source", "exit"])
    }

    @Test func sourceSignalledDuringSleepRunsInTheNextIteration() {
        let events = Recorder<String>()
        let result = onFreshThread {
            let loop = Loop.current
            let source = LoopSource { events.append("source") }
            loop.add(source, forMode: .default)
            let observer = LoopObserver(activities: .allActivities) { _, activity in
                events.append(activity.description)
            }
            loop.add(observer, forMode: .default)
            whenAsleep(loop) { source.signal() }
            return loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true)
        }
        #expect(result == .handledSource)
        #expect(
            events.events == [
                "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting",
                "beforeTimers", "beforeSources", "source", "exit",
            ])
    }

    @Test(arguments: sixActivities)
    func eachActivityIsSelectable(activity: Loop.Activity) {
        let selected = Recorder<String>()
        let all = Recorder<String>()
        let result = onFreshThread {
            let loop = Loop.current
            loop.add(
                LoopObserver(activities: activity) { _, seen in selected.append(seen.description) }, forMode: .default)
            loop.add(
                LoopObserver(activities: .allActivities) { _, seen in all.append(seen.description) }, forMode: .default)
            return runWithOneTimer(loop)
        }
        #expect(result == .finished)
        #expect(all.events == oneSleepRun)
        #expect(selected.events == [activity.description])
    }

    // MARK: Order

    @Test(arguments: [[5, -1, 5, 0, -1], [0, 0, 0], [3, 2, 1], [Int.max, Int.min, 0, Int.min]])
    func calledInAscendingOrderThenInsertionOrder(orders: [Int]) {
        let calls = Recorder<Int>()
        onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            for (index, order) in orders.enumerated() {
                let observer = LoopObserver(activities: .entry, order: order) { _, _ in calls.append(index) }
                loop.add(observer, forMode: .default)
            }
            loop.run(mode: .default, for: .zero)
        }
        let expected = orders.indices.sorted { (orders[$0], $0) < (orders[$1], $1) }
        #expect(calls.events == expected)
    }

    /// Observers added to `.common` keep their tie order in a mode that joins the common set later
    /// (it receives them in the order they joined `.common`, not in hash-table order).
    @Test func tiesKeepTheirOrderInAModeAddedToTheCommonSetLater() {
        let calls = Recorder<Int>()
        onFreshThread {
            let loop = Loop.current
            let joining = Loop.Mode("joining")
            loop.add(LoopSource {}, forMode: joining)
            let observers = (0..<16).map { index in
                LoopObserver(activities: .entry) { _, _ in calls.append(index) }
            }
            for observer in observers { loop.add(observer, forMode: .common) }
            loop.addCommonMode(joining)
            loop.run(mode: joining, for: .zero)
            for observer in observers { observer.invalidate() }
        }
        #expect(calls.events == Array(0..<16))
    }

    // MARK: One-shot observers

    @Test func nonRepeatingObserverIsCalledOnceThenInvalid() {
        let calls = Recorder<String>()
        let (valid, contained, result) = onFreshThread {
            let loop = Loop.current
            let observer = LoopObserver(activities: .allActivities, repeats: false) { _, activity in
                calls.append(activity.description)
            }
            loop.add(observer, forMode: .default)
            let result = runWithOneTimer(loop)
            return (observer.isValid, loop.contains(observer, inMode: .default), result)
        }
        #expect(result == .finished)
        #expect(calls.events == ["entry"])
        #expect(!valid)
        #expect(!contained)
    }

    // MARK: Nested runs

    @Test func observerIsNotReenteredByANestedRunFromItsCallout() {
        let events = Recorder<String>()
        let (outer, inner) = onFreshThread {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)
            var inner: Loop.RunResult?
            var nested = false
            let nesting = LoopObserver(
                activities: .allActivities, order: 0,
                loop.isolated { _, activity in
                    events.append("A \(activity)")
                    if activity == .entry && !nested {
                        nested = true
                        events.append("nested run")
                        inner = loop.run(mode: .default, for: .zero)
                        events.append("nested run returned")
                    }
                })
            let other = LoopObserver(activities: .allActivities, order: 1) { _, activity in
                events.append("B \(activity)")
            }
            loop.add(nesting, forMode: .default)
            loop.add(other, forMode: .default)
            // A timer ends the outer run after it has slept once; a time limit would end it before
            // it sleeps if the first pass were slow (a loaded machine).
            loop.add(LoopTimer(after: .milliseconds(20)) { _ in loop.stop() }, forMode: .default)
            let outer = loop.run(mode: .default, for: .seconds(60))
            return (outer, inner)
        }
        #expect(outer == .stopped)
        #expect(inner == .timedOut)
        #expect(
            events.events == [
                "A entry", "nested run",
                // The nested run (a poll: zero timeout) calls B but not A, whose callout is running.
                "B entry", "B beforeTimers", "B beforeSources", "B exit",
                "nested run returned",
                "B entry",
                "A beforeTimers", "B beforeTimers", "A beforeSources", "B beforeSources",
                "A beforeWaiting", "B beforeWaiting", "A afterWaiting", "B afterWaiting",
                "A exit", "B exit",
            ])
    }

    // MARK: Invalidation

    @Test(arguments: [Loop.Activity.entry, .beforeSources, .afterWaiting])
    func invalidateFromInsideItsCallout(at activity: Loop.Activity) {
        let calls = Recorder<String>()
        let control = Recorder<String>()
        let (valid, contained, result) = onFreshThread {
            let loop = Loop.current
            let observer = LoopObserver(activities: .allActivities) { observer, seen in
                calls.append(seen.description)
                if seen == activity { observer.invalidate() }
            }
            loop.add(observer, forMode: .default)
            loop.add(
                LoopObserver(activities: .allActivities) { _, seen in control.append(seen.description) },
                forMode: .default)
            let result = runWithOneTimer(loop)
            return (observer.isValid, loop.contains(observer, inMode: .default), result)
        }
        let index = oneSleepRun.firstIndex(of: activity.description)!
        #expect(result == .finished)
        #expect(calls.events == Array(oneSleepRun[...index]))
        #expect(control.events == oneSleepRun)
        #expect(!valid)
        #expect(!contained)
    }

    // MARK: Keeping a mode alive

    @Test func observersAloneDoNotKeepAModeAlive() {
        let calls = Recorder<String>()
        let (result, untilResult, elapsed) = onFreshThread {
            let loop = Loop.current
            let record: @Sendable (LoopObserver, Loop.Activity) -> Void = { _, activity in
                calls.append(activity.description)
            }
            let observer = LoopObserver(activities: .allActivities, record)
            let common = LoopObserver(activities: .allActivities, record)
            loop.add(observer, forMode: .default)
            loop.add(common, forMode: .common)
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(2))
            let untilResult = loop.run(mode: .default, until: .now + .seconds(2))
            return (result, untilResult, ContinuousClock.now - start)
        }
        #expect(result == .finished)
        #expect(untilResult == false)
        #expect(calls.events.isEmpty)
        #expect(elapsed < .milliseconds(500))
    }

    @Test func modeWithOnlyObserversLeftFinishes() {
        let calls = Recorder<String>()
        let (first, second) = onFreshThread {
            let loop = Loop.current
            let timer = LoopTimer(after: .seconds(60)) { _ in }
            loop.add(timer, forMode: .default)
            let observer = LoopObserver(activities: .allActivities) { _, activity in
                calls.append(activity.description)
            }
            loop.add(observer, forMode: .default)
            let first = loop.run(mode: .default, for: .zero)
            loop.remove(timer, forMode: .default)
            calls.append("removed")
            let second = loop.run(mode: .default, for: .seconds(2))
            return (first, second)
        }
        #expect(first == .timedOut)
        #expect(second == .finished)
        #expect(calls.events == ["entry", "beforeTimers", "beforeSources", "exit", "removed"])
    }

    /// Observers of several orders, added interleaved, some removed (one order emptied entirely,
    /// then used again), a common one joining a mode that becomes common later: each pass calls
    /// them by order, then by when they joined the mode.
    @Test func mixedOrdersThroughRemovalsAndReAddsKeepTheirOrder() {
        let calls = Recorder<String>()
        let late = Loop.Mode("late")
        let (firstPass, secondPass, latePass) = onFreshThread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .common)
            loop.add(keepAlive, forMode: late)
            func observer(_ name: String, order: Int) -> LoopObserver {
                LoopObserver(activities: .entry, order: order) { _, _ in calls.append(name) }
            }
            let orders = [3, -2, 0, 3, 0, -2, 7, 0]
            let observers = orders.enumerated().map { index, order in observer("\(order)/\(index)", order: order) }
            // A common observer, added before the others.
            let common = observer("0/common", order: 0)
            loop.add(common, forMode: .common)
            for observer in observers { loop.add(observer, forMode: .default) }
            loop.run(mode: .default, for: .zero)
            let firstPass = calls.events
            // Every order-7 and order-(-2) observer leaves, and the first of order 0; order 7
            // comes back with a new observer.
            for index in [1, 5, 6, 2] { observers[index].invalidate() }
            let again = observer("7/again", order: 7)
            loop.add(again, forMode: .default)
            calls.removeAll()
            loop.run(mode: .default, for: .zero)
            let secondPass = calls.events
            for observer in observers { loop.add(observer, forMode: late) }
            loop.addCommonMode(late)
            calls.removeAll()
            loop.run(mode: late, for: .zero)
            let latePass = calls.events
            common.invalidate()
            again.invalidate()
            for observer in observers { observer.invalidate() }
            keepAlive.invalidate()
            return (firstPass, secondPass, latePass)
        }
        #expect(firstPass == ["-2/1", "-2/5", "0/common", "0/2", "0/4", "0/7", "3/0", "3/3", "7/6"])
        #expect(secondPass == ["0/common", "0/4", "0/7", "3/0", "3/3", "7/again"])
        // The late mode got the survivors first; the common observer joined it when it became
        // common, after them.
        #expect(latePass == ["0/4", "0/7", "0/common", "3/0", "3/3"])
    }
}
