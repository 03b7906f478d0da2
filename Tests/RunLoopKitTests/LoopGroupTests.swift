import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

@Suite struct LoopGroupTests {
    @Test func nextIsRoundRobinOverDistinctThreads() {
        let group = LoopGroup(threads: 3, name: "group")
        defer { group.shutdown() }
        #expect(group.loops.count == 3)
        #expect(Set(group.loops.map { ObjectIdentifier($0) }).count == 3)
        let picked = (0..<6).map { _ in ObjectIdentifier(group.next()) }
        #expect(picked[0..<3] == picked[3..<6])
        #expect(Set(picked).count == 3)
    }

    /// Shutdown runs the blocks posted before it, then stops and joins every thread: nothing runs
    /// on the group afterwards.
    @Test func shutdownDrainsStopsAndJoins() {
        let group = LoopGroup(threads: 4, name: "drain")
        let ran = Atomic<Int>(0)
        for _ in 0..<1_000 {
            group.next().perform { ran.add(1, ordering: .relaxed) }
        }
        group.shutdown()
        #expect(ran.load(ordering: .relaxed) == 1_000)
        for loop in group.loops {
            #expect(loop.hasEnded)
            // Refused, so it can never run: a block accepted now could run later, unseen.
            #expect(!loop.perform { ran.add(1, ordering: .relaxed) })
        }
        group.shutdown()  // idempotent
        #expect(ran.load(ordering: .relaxed) == 1_000)
    }

    @Test func zeroThreadsIsAProgrammerError() async {
        await #expect(processExitsWith: .failure) {
            _ = LoopGroup(threads: 0, name: "none")
        }
    }
}
