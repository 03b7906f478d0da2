import Testing

@testable import RunLoopKit

/// The hooks other parts of the library add to a loop's passes (`Loop.addHook(_:at:)`): the points
/// they are called at and their order, the pass numbers of nested runs, and a hook added while a
/// pass runs.
@Suite struct LoopHookTests {
    /// Logs each call as "name point #pass", the pass number read when it is called.
    final class LoggingHook: LoopHook {
        let name: String
        let log: Recorder<String>
        /// Called after the call is logged (to add a hook from inside one).
        var onCall: ((Loop) -> Void)?

        init(_ name: String, _ log: Recorder<String>) {
            self.name = name
            self.log = log
        }

        override func passBegins(_ loop: Loop) { record("begins", loop) }
        override func passEnds(_ loop: Loop) { record("ends", loop) }
        override func beforeSleeping(_ loop: Loop) { record("beforeSleeping", loop) }

        private func record(_ point: String, _ loop: Loop) {
            log.append("\(name) \(point) #\(loop.passNumber)")
            onCall?(loop)
        }
    }

    /// The log without the pass numbers.
    static func points(_ log: Recorder<String>) -> [String] {
        log.events.map { $0.split(separator: " #").first.map(String.init) ?? $0 }
    }

    @Test func hooksAreCalledAroundEachPassInTheOrderTheyWereAdded() {
        let log = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            loop.addHook(LoggingHook("A", log), at: [.passBegins, .passEnds, .beforeSleeping])
            loop.addHook(LoggingHook("B", log), at: [.passBegins, .passEnds])
            let source = LoopSource { log.append("source") }
            loop.add(source, forMode: .default)
            source.signal()
            // A zero timeout: one pass, which does not sleep.
            loop.run(mode: .default, for: .zero)
            source.invalidate()
        }
        #expect(Self.points(log) == ["A begins", "B begins", "source", "A ends", "B ends"])
    }

    @Test func beforeSleepingHooksAreCalledBeforeTheLoopSleeps() {
        let log = Recorder<String>()
        let result = onFreshThread {
            let loop = Loop.current
            loop.addHook(LoggingHook("A", log), at: [.passEnds, .beforeSleeping])
            loop.addHook(LoggingHook("B", log), at: [.beforeSleeping])
            loop.add(
                LoopTimer(after: .milliseconds(20)) { _ in
                    log.append("timer")
                    Loop.current.stop()
                }, forMode: .default)
            return loop.run(mode: .default, for: .seconds(10))
        }
        #expect(result == .stopped)
        let points = Self.points(log)
        // The loop slept for the timer: the hooks were called before, in their order, each time the
        // loop asked whether it may sleep; the pass ended after the timer fired.
        #expect(points.starts(with: ["A beforeSleeping", "B beforeSleeping"]))
        #expect(points.suffix(2) == ["timer", "A ends"])
        let beforeTimer = points.prefix { $0 != "timer" }
        #expect(beforeTimer.count % 2 == 0)
        for index in stride(from: 0, to: beforeTimer.count, by: 2) {
            #expect(Array(beforeTimer[index...index + 1]) == ["A beforeSleeping", "B beforeSleeping"])
        }
    }

    @Test func aNestedRunsPassesHaveNumbersOfTheirOwnAndTheOuterOneComesBack() {
        let log = Recorder<String>()
        let outside = onFreshThread { () -> [UInt16] in
            let loop = Loop.current
            var outside = [loop.passNumber]
            loop.addHook(LoggingHook("A", log), at: [.passBegins, .passEnds])
            let inner = LoopSource { log.append("inner #\(Loop.current.passNumber)") }
            let outer = LoopSource {
                let loop = Loop.current
                log.append("outer #\(loop.passNumber)")
                inner.signal()
                loop.run(mode: .default, for: .zero)
                log.append("after nested #\(loop.passNumber)")
            }
            loop.add(inner, forMode: .default)
            loop.add(outer, forMode: .default)
            outer.signal()
            loop.run(mode: .default, for: .zero)
            outside.append(loop.passNumber)
            inner.invalidate()
            outer.invalidate()
            return outside
        }
        #expect(outside == [0, 0])
        let entries = log.events
        #expect(
            Self.points(log) == [
                "A begins", "outer", "A begins", "inner", "A ends", "after nested", "A ends",
            ])
        let numbers = entries.map { $0.split(separator: "#").last.flatMap { UInt16($0) } ?? 0 }
        let (outerPass, innerPass) = (numbers[0], numbers[2])
        #expect(outerPass != 0 && innerPass != 0 && outerPass != innerPass)
        #expect(numbers == [outerPass, outerPass, innerPass, innerPass, innerPass, outerPass, outerPass])
    }

    @Test func aHookAddedDuringAPassIsCalledFromTheNextPointOn() {
        let log = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            let first = LoggingHook("A", log)
            // Added by A at the first pass's end: called from the next point on (not at this one).
            first.onCall = { loop in
                guard first.onCall != nil else { return }
                first.onCall = nil
                loop.addHook(LoggingHook("C", log), at: [.passBegins, .passEnds])
            }
            let source = LoopSource {
                log.append("source")
                Loop.current.addHook(LoggingHook("B", log), at: [.passBegins, .passEnds])
            }
            loop.add(source, forMode: .default)
            source.signal()
            loop.run(mode: .default, for: .zero)
            // A was added between passes: it sees the next pass begin.
            loop.addHook(first, at: [.passEnds, .passBegins])
            loop.run(mode: .default, for: .zero)
            loop.run(mode: .default, for: .zero)
            source.invalidate()
        }
        #expect(
            Self.points(log) == [
                // B, added in the pass, is called when it ends, without having seen it begin.
                "source", "B ends",
                // A, added between passes, adds C when this pass begins: C is called at its end.
                "B begins", "A begins", "B ends", "A ends", "C ends",
                "B begins", "A begins", "C begins", "B ends", "A ends", "C ends",
            ])
    }

    @Test func aHookAddedInANestedRunIsCalledWhenTheOuterPassEnds() {
        let log = Recorder<String>()
        onFreshThread {
            let loop = Loop.current
            let source = LoopSource {
                let loop = Loop.current
                let nested = LoopSource { Loop.current.addHook(LoggingHook("A", log), at: [.passEnds]) }
                loop.add(nested, forMode: .default)
                nested.signal()
                loop.run(mode: .default, for: .zero)
                nested.invalidate()
                log.append("after nested")
            }
            loop.add(source, forMode: .default)
            source.signal()
            loop.run(mode: .default, for: .zero)
            source.invalidate()
        }
        #expect(Self.points(log) == ["A ends", "after nested", "A ends"])
    }
}
