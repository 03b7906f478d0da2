import Foundation
import Testing

@testable import RunLoopKit

/// Sources and descriptor sources leaving their modes in any order, many at a time: each mode
/// keeps serving exactly the ones still in it, in every mode that holds them, and the ones that
/// left can come back.
@Suite struct SourceRemovalTests {
    /// 400 sources, each in `.default` and in "other"; in a shuffled order three in four are
    /// invalidated, one in eight leaves `.default` and one in eight "other" (so that each mode is
    /// left with far fewer than it had), then the ones that left `.default` are added to it again.
    /// Every source is signalled; one pass of each mode performs exactly the sources it holds.
    @Test func sourcesLeavingInAnyOrderLeaveTheRestServed() {
        let other: Loop.Mode = "other"
        let outcome = onFreshThread { () -> (expected: [Set<Int>], performed: [Set<Int>], found: Bool) in
            let loop = Loop.current
            let performed = Recorder<Int>()
            let sources = (0..<400).map { index in LoopSource { performed.append(index) } }
            for source in sources {
                loop.add(source, forMode: .default)
                loop.add(source, forMode: other)
            }
            var inDefault = Set(0..<400)
            var inOther = Set(0..<400)
            var generator = SeededGenerator(state: 7)
            for index in (0..<400).shuffled(using: &generator) {
                switch index % 8 {
                case 6:
                    loop.remove(sources[index], forMode: .default)
                    inDefault.remove(index)
                case 7:
                    loop.remove(sources[index], forMode: other)
                    inOther.remove(index)
                default:
                    sources[index].invalidate()
                    inDefault.remove(index)
                    inOther.remove(index)
                }
            }
            for index in stride(from: 6, to: 400, by: 8) {
                loop.add(sources[index], forMode: .default)
                inDefault.insert(index)
            }
            let found = (0..<400).allSatisfy { index in
                loop.contains(sources[index], inMode: .default) == inDefault.contains(index)
                    && loop.contains(sources[index], inMode: other) == inOther.contains(index)
            }
            var passes: [Set<Int>] = []
            for mode in [Loop.Mode.default, other] {
                performed.removeAll()
                for source in sources { source.signal() }
                _ = loop.run(mode: mode, for: .zero)
                passes.append(Set(performed.events))
            }
            for source in sources { source.invalidate() }
            return ([inDefault, inOther], passes, found)
        }
        #expect(outcome.found)
        #expect(outcome.performed[0] == outcome.expected[0])
        #expect(outcome.performed[1] == outcome.expected[1])
    }

    /// 100 descriptor sources, each on a socket with a byte waiting; 90 leave in a shuffled order
    /// (removed or invalidated). One pass calls exactly the ten left.
    @Test func descriptorSourcesLeavingInAnyOrderLeaveTheRestServed() {
        let outcome = onFreshThread { () -> (expected: Set<Int>, called: Set<Int>) in
            let loop = Loop.current
            let called = Recorder<Int>()
            let pairs = (0..<100).map { _ in SocketPair() }
            let sources = pairs.indices.map { index in
                try! LoopDescriptorSource(fileDescriptor: pairs[index].left, events: .readable) { source, _ in
                    called.append(index)
                    source.invalidate()
                }
            }
            for source in sources { loop.add(source, forMode: .default) }
            for pair in pairs { pair.send(1, from: pair.right) }
            var generator = SeededGenerator(state: 11)
            var left = Set(0..<100)
            for index in (0..<100).shuffled(using: &generator).prefix(90) {
                if index % 2 == 0 {
                    loop.remove(sources[index], forMode: .default)
                } else {
                    sources[index].invalidate()
                }
                left.remove(index)
            }
            _ = loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: false)
            for source in sources { source.invalidate() }
            return (left, Set(called.events))
        }
        #expect(outcome.called == outcome.expected)
    }
}
