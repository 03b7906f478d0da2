import Testing

@testable import RunLoopKit

/// The kinds of item a mode holds.
enum ItemKind: String, CaseIterable, Sendable {
    case timer, observer, source
}

/// One item of a given kind, armed so that a run of a mode holding it makes exactly one callout:
/// a timer that is already due, an observer of `entry`, a signalled source.
/// Used on its loop's thread only.
final class ModeProbe {
    let kind: ItemKind
    private(set) var callouts = 0
    private var timer: LoopTimer!
    private var observer: LoopObserver!
    private var source: LoopSource!

    init(_ kind: ItemKind) {
        self.kind = kind
        switch kind {
        case .timer: timer = LoopTimer(after: .zero, Loop.current.isolated { [unowned self] _ in callouts += 1 })
        case .observer:
            observer = LoopObserver(activities: .entry, Loop.current.isolated { [unowned self] _, _ in callouts += 1 })
        case .source:
            source = LoopSource(Loop.current.isolated { [unowned self] in callouts += 1 })
            source.signal()
        }
    }

    func add(to loop: Loop, _ mode: Loop.Mode) {
        switch kind {
        case .timer: loop.add(timer, forMode: mode)
        case .observer: loop.add(observer, forMode: mode)
        case .source: loop.add(source, forMode: mode)
        }
    }

    func remove(from loop: Loop, _ mode: Loop.Mode) {
        switch kind {
        case .timer: loop.remove(timer, forMode: mode)
        case .observer: loop.remove(observer, forMode: mode)
        case .source: loop.remove(source, forMode: mode)
        }
    }

    func isIn(_ loop: Loop, _ mode: Loop.Mode) -> Bool {
        switch kind {
        case .timer: loop.contains(timer, inMode: mode)
        case .observer: loop.contains(observer, inMode: mode)
        case .source: loop.contains(source, inMode: mode)
        }
    }

    var isValid: Bool {
        switch kind {
        case .timer: timer.isValid
        case .observer: observer.isValid
        case .source: source.isValid
        }
    }
}

/// A custom mode.
private let custom = Loop.Mode("x")

/// Runs `mode` once for a short while, kept alive by an idle source of its own.
@discardableResult
private func runBriefly(_ loop: Loop, _ mode: Loop.Mode) -> Loop.RunResult {
    loop.add(LoopSource {}, forMode: mode)
    return loop.run(mode: mode, for: .milliseconds(20))
}

/// Modes: filtering, the common set, membership queries, and mode names.
@Suite struct ModeTests {
    @Test func onlyTheCommonSetsNameIsTheCommonSet() {
        #expect(Loop.Mode.common.isCommonSet)
        #expect(Loop.Mode("common").isCommonSet)
        #expect(!Loop.Mode.default.isCommonSet)
        #expect(!Loop.Mode("Common").isCommonSet)
    }

    /// The named modes are the modes of their names: equal, hashed alike, found under each other
    /// in a dictionary (their hashes are literals).
    @Test(arguments: [(Loop.Mode.default, "default"), (.tracking, "tracking"), (.common, "common")])
    func namedModesAreTheModesOfTheirNames(mode: Loop.Mode, name: String) {
        let made = Loop.Mode(name)
        #expect(mode == made)
        #expect(mode.hashValue == made.hashValue)
        #expect([made: 1][mode] == 1)
        #expect(mode.name == name)
    }

    @Test(arguments: ItemKind.allCases, [Loop.Mode.tracking, custom])
    func itemsOfOtherModesWaitAndAreNotDropped(kind: ItemKind, running other: Loop.Mode) {
        let (otherResult, whileOther, defaultResult, afterDefault) = onFreshThread {
            let loop = Loop.current
            let probe = ModeProbe(kind)
            probe.add(to: loop, .default)
            let otherResult = runBriefly(loop, other)
            let whileOther = probe.callouts
            let defaultResult = runBriefly(loop, .default)
            return (otherResult, whileOther, defaultResult, probe.callouts)
        }
        #expect(otherResult == .timedOut)
        #expect(whileOther == 0)
        #expect(defaultResult == .timedOut)
        #expect(afterDefault == 1)
    }

    @Test(arguments: ItemKind.allCases, [Loop.Mode.default, .tracking])
    func commonAddsToDefaultAndTracking(kind: ItemKind, running mode: Loop.Mode) {
        let (inDefault, inTracking, inCommon, inCustom, callouts) = onFreshThread {
            let loop = Loop.current
            let probe = ModeProbe(kind)
            probe.add(to: loop, .common)
            let membership = (
                probe.isIn(loop, .default), probe.isIn(loop, .tracking), probe.isIn(loop, .common),
                probe.isIn(loop, custom)
            )
            runBriefly(loop, mode)
            return (membership.0, membership.1, membership.2, membership.3, probe.callouts)
        }
        #expect(inDefault)
        #expect(inTracking)
        #expect(inCommon)
        #expect(!inCustom)
        #expect(callouts == 1)
    }

    @Test(arguments: ItemKind.allCases)
    func addCommonModeCopiesExistingAndLaterCommonItems(kind: ItemKind) {
        let (commonModes, earlyIn, lateIn, earlyCallouts, lateCallouts) = onFreshThread {
            let loop = Loop.current
            let early = ModeProbe(kind)
            let late = ModeProbe(kind)
            early.add(to: loop, .common)
            loop.addCommonMode(custom)
            late.add(to: loop, .common)
            let earlyIn = early.isIn(loop, custom)
            let lateIn = late.isIn(loop, custom)
            runBriefly(loop, custom)
            return (loop.commonModes, earlyIn, lateIn, early.callouts, late.callouts)
        }
        #expect(commonModes == [.default, .tracking, custom])
        #expect(earlyIn)
        #expect(lateIn)
        #expect(earlyCallouts == 1)
        #expect(lateCallouts == 1)
    }

    @Test(arguments: ItemKind.allCases)
    func removingFromCommonRemovesFromEveryCommonMode(kind: ItemKind) {
        let (membership, valid, callouts) = onFreshThread {
            let loop = Loop.current
            let probe = ModeProbe(kind)
            loop.addCommonMode(custom)
            probe.add(to: loop, .common)
            probe.remove(from: loop, .common)
            let modes: [Loop.Mode] = [.default, .tracking, custom, .common]
            let membership = modes.map { probe.isIn(loop, $0) }
            for mode in modes.dropLast() { runBriefly(loop, mode) }
            return (membership, probe.isValid, probe.callouts)
        }
        #expect(membership == [false, false, false, false])
        // Removing is not invalidating.
        #expect(valid)
        #expect(callouts == 0)
    }

    @Test(arguments: ItemKind.allCases)
    func containsAnswersPerMode(kind: ItemKind) {
        let steps: [[Bool]] = onFreshThread {
            let loop = Loop.current
            let probe = ModeProbe(kind)
            let modes: [Loop.Mode] = [.default, .tracking, custom, .common]
            var steps: [[Bool]] = []
            func record() { steps.append(modes.map { probe.isIn(loop, $0) }) }
            record()
            probe.add(to: loop, .default)
            record()
            probe.add(to: loop, custom)
            record()
            probe.remove(from: loop, .default)
            record()
            probe.add(to: loop, .common)
            record()
            return steps
        }
        // Columns: default, tracking, custom, common.
        #expect(
            steps == [
                [false, false, false, false],
                [true, false, false, false],
                [true, false, true, false],
                [false, false, true, false],
                [true, true, true, true],
            ])
    }

    @Test func runningCommonFinishesWithoutCallouts() {
        let activities = Recorder<Loop.Activity>()
        let (forResult, untilResult, callouts) = onFreshThread {
            let loop = Loop.current
            var callouts = 0
            loop.add(LoopTimer(after: .zero, loop.isolated { _ in callouts += 1 }), forMode: .common)
            let source = LoopSource(loop.isolated { callouts += 1 })
            loop.add(source, forMode: .common)
            source.signal()
            let observer = LoopObserver(activities: .allActivities) { _, activity in activities.append(activity) }
            loop.add(observer, forMode: .common)
            let forResult = loop.run(mode: .common, for: .seconds(1))
            let untilResult = loop.run(mode: .common, until: .now + .seconds(1))
            return (forResult, untilResult, callouts)
        }
        #expect(forResult == .finished)
        #expect(untilResult == false)
        #expect(callouts == 0)
        #expect(activities.events.isEmpty)
    }

    @Test(
        arguments: zip(
            ["default", "tracking", "common", "x", ""] as [Loop.Mode],
            ["default", "tracking", "common", "x", ""]))
    func stringLiteralModesEqualNamedModes(literal: Loop.Mode, name: String) {
        #expect(literal == Loop.Mode(name))
        #expect(literal.name == name)
        #expect(Set([literal, Loop.Mode(name)]).count == 1)
    }

    @Test func stringLiteralsNameTheBuiltInModes() {
        #expect(("default" as Loop.Mode) == .default)
        #expect(("tracking" as Loop.Mode) == .tracking)
        #expect(("common" as Loop.Mode) == .common)
        #expect(("x" as Loop.Mode) != .default)
    }

    @Test func itemsAddedUnderALiteralAreFoundUnderTheName() {
        let (found, callouts) = onFreshThread {
            let loop = Loop.current
            let probe = ModeProbe(.source)
            probe.add(to: loop, "import")
            let found = probe.isIn(loop, Loop.Mode("import"))
            runBriefly(loop, Loop.Mode("import"))
            return (found, probe.callouts)
        }
        #expect(found)
        #expect(callouts == 1)
    }

    @Test func commonModesStartAsDefaultAndTracking() {
        let modes = onFreshThread { Loop.current.commonModes }
        #expect(modes == [.default, .tracking])
    }

    @Test func commonBlocksRunInAModeAddedToTheCommonSetLater() {
        let ran = Recorder<Loop.Mode?>()
        let (before, ranBefore, after) = onFreshThread {
            let loop = Loop.current
            loop.perform(inModes: [.common]) {
                ran.append(loop.currentMode)
                loop.stop()
            }
            // Not yet a common mode: the block is not for it, so the mode is empty.
            let before = loop.run(mode: custom, for: .milliseconds(20))
            let ranBefore = ran.count
            loop.addCommonMode(custom)
            let after = loop.run(mode: custom, for: .seconds(5))
            return (before, ranBefore, after)
        }
        #expect(before == .finished)
        #expect(ranBefore == 0)
        #expect(after == .stopped)
        #expect(ran.events == [custom])
    }

    @Test(arguments: ItemKind.allCases)
    func itemsAddedTwiceAreThereOnce(kind: ItemKind) {
        let (callouts, inDefault, calloutsAfterRemoval) = onFreshThread {
            let loop = Loop.current
            let probe = ModeProbe(kind)
            probe.add(to: loop, .default)
            probe.add(to: loop, .default)
            probe.add(to: loop, .common)
            probe.add(to: loop, .common)
            runBriefly(loop, .default)
            let callouts = probe.callouts
            // One removal takes it out: it was there once.
            probe.remove(from: loop, .default)
            let inDefault = probe.isIn(loop, .default)
            runBriefly(loop, .default)
            return (callouts, inDefault, probe.callouts - callouts)
        }
        #expect(callouts == 1)
        #expect(!inDefault)
        #expect(calloutsAfterRemoval == 0)
    }

    /// The inline mode list behind item membership, against an array doing the same: removals from
    /// every position, so that later modes move into the inline slots.
    @Test(arguments: [
        ["default"], ["default", "tracking"], ["a", "b", "c"], ["a", "b", "c", "d", "e"],
    ])
    func modeListKeepsOrderThroughAppendsAndRemovals(names: [String]) {
        // The list holds modes by their numbers in the loop's tables.
        let modes = names.indices.map { ModeSlot($0) }
        for removed in modes.indices {
            var list = ModeList()
            var reference: [ModeSlot] = []
            for mode in modes {
                list.append(mode)
                reference.append(mode)
            }
            #expect(Array(list) == reference)
            let removedOnce = list.remove(modes[removed])
            let removedTwice = list.remove(modes[removed])
            #expect(removedOnce && !removedTwice)
            reference.remove(at: removed)
            #expect(Array(list) == reference)
            #expect(modes.map { list.contains($0) } == modes.map { reference.contains($0) })
            for mode in reference {
                let wasThere = list.remove(mode)
                #expect(wasThere)
            }
            #expect(list.isEmpty)
            #expect(Array(list).isEmpty)
            list.append(99)
            #expect(Array(list) == [99])
        }
    }
}
