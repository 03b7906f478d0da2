import Dispatch
import Testing

@testable import RunLoopKit

// A connection's lock word, whose other bits are its switches: changes made under the lock from
// several threads at once are never lost, and the switches read without the lock are the ones the
// last holder stored.

/// A lock word and a count it guards, shared by the threads of a test.
private final class Guarded: @unchecked Sendable {
    // @unchecked: `count` is changed only under `word`.
    let word = SettingsWord()
    var count = 0
}

@Suite struct SettingsWordTests {
    @Test func changesFromManyThreadsAtOnceAreNeverLost() {
        let guarded = Guarded()
        let switches: [SettingsWord.Switches] = [.readingPaused, .pausesWhileUnwritable, .allowsHalfClosure]
        let rounds = 20_000
        DispatchQueue.concurrentPerform(iterations: switches.count) { index in
            for round in 0..<rounds {
                guarded.word.withLock { current in
                    guarded.count += 1
                    // Each thread turns its own switch on and off; it ends on.
                    if round % 2 == 0 { current.remove(switches[index]) } else { current.insert(switches[index]) }
                }
            }
        }
        #expect(guarded.count == switches.count * rounds)
        #expect(guarded.word.switches == [.readingPaused, .pausesWhileUnwritable, .allowsHalfClosure])
    }

    @Test func theSwitchesReadWithoutTheLockAreTheLastStored() {
        let guarded = Guarded()
        #expect(guarded.word.switches == [])
        guarded.word.withLock { $0.formUnion(.allowsHalfClosure) }
        #expect(guarded.word.switches == .allowsHalfClosure)
        // Taking the lock without a change leaves them as they were.
        let counted = guarded.word.withLock { _ in
            guarded.count += 1
            return guarded.count
        }
        #expect(counted == 1)
        #expect(guarded.word.switches == .allowsHalfClosure)
        guarded.word.withLock { $0 = [.readingPaused] }
        #expect(guarded.word.switches == .readingPaused)
    }
}
