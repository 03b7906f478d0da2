import Testing

@testable import RunLoopKit

/// The loop's block buffer: order kept through growth, moves and partitions, and every block's
/// closure released exactly once, whether it ran or the buffer went away with it.
@Suite(.serialized) struct BlockBufferTests {
    /// Counts live instances; a block's closure holds one.
    private final class Token: @unchecked Sendable {
        static let live = Locked(0)
        let value: Int
        init(_ value: Int) {
            self.value = value
            Token.live.withLock { $0 += 1 }
        }
        deinit { Token.live.withLock { $0 -= 1 } }
    }

    private static func block(_ value: Int, into output: Recorder<Int>) -> LoopBlock {
        let token = Token(value)
        return LoopBlock(.closure { output.append(token.value) })
    }

    /// Runs every block of `buffer` the way the loop does: moved out of its slot, then called.
    private static func runAll(_ buffer: BlockBuffer) {
        let blocks = buffer.takeAll()
        for slot in blocks.indices {
            let body = blocks[slot].takeBody()
            (blocks.baseAddress! + slot).deinitialize(count: 1)
            if case .closure(let closure) = body { closure() }
        }
    }

    @Test(arguments: [0, 1, 15, 16, 17, 1_000, 70_000])
    func appendedBlocksRunInOrderThroughGrowth(_ count: Int) {
        let output = Recorder<Int>()
        let before = Token.live.withLock { $0 }
        do {
            let buffer = BlockBuffer()
            for value in 0..<count { buffer.append(Self.block(value, into: output)) }
            #expect(buffer.count == count)
            #expect(buffer.isEmpty == (count == 0))
            Self.runAll(buffer)
            #expect(buffer.isEmpty)
        }
        #expect(output.events == Array(0..<count))
        #expect(Token.live.withLock { $0 } == before)
    }

    @Test func moveWhereSplitsStablyAndAppendMovingFromConcatenates() {
        let output = Recorder<Int>()
        let before = Token.live.withLock { $0 }
        do {
            let pending = BlockBuffer()
            for value in 0..<100 {
                pending.append(Self.block(value, into: output), modes: value % 3 == 0 ? [.tracking] : nil)
            }
            let runnable = BlockBuffer(capacity: 1)
            pending.move(where: { $0 == nil }, to: runnable)
            #expect(runnable.count == 66)
            // 34 blocks, each after the slot holding its modes.
            #expect(pending.count == 68)
            #expect(pending.allSatisfy { $0 == [.tracking] })
            #expect(!runnable.contains { $0 != nil })
            runnable.append(movingFrom: pending)
            #expect(pending.isEmpty)
            Self.runAll(runnable)
        }
        let expected = (0..<100).filter { $0 % 3 != 0 } + (0..<100).filter { $0 % 3 == 0 }
        #expect(output.events == expected)
        #expect(Token.live.withLock { $0 } == before)
    }

    @Test func blocksNeverRunAreReleasedWithTheBuffer() {
        let output = Recorder<Int>()
        let before = Token.live.withLock { $0 }
        do {
            let buffer = BlockBuffer()
            for value in 0..<40 { buffer.append(Self.block(value, into: output)) }
            #expect(Token.live.withLock { $0 } == before + 40)
        }
        #expect(Token.live.withLock { $0 } == before)
        #expect(output.events.isEmpty)
    }

    /// Every byte of a block travels from the posting thread's processor to the loop's: a block
    /// is its body and a stamp, nothing more.
    @Test func aBlockIsItsBodyAndAStampInTwentyFourBytes() {
        #expect(MemoryLayout<LoopBlock>.stride == 24)
    }

    /// A block for named modes is two slots, its modes and itself: they stay together through
    /// every move, in order among the others.
    @Test func aBlockForNamedModesTravelsWithItsModes() {
        let output = Recorder<Int>()
        let before = Token.live.withLock { $0 }
        do {
            let pending = BlockBuffer(capacity: 1)
            pending.append(Self.block(0, into: output), modes: nil)
            pending.append(Self.block(1, into: output), modes: [.tracking, "other"])
            pending.append(Self.block(2, into: output), modes: nil)
            pending.append(Self.block(3, into: output), modes: [.default])
            #expect(pending.count == 6)
            var seen: [[Loop.Mode]?] = []
            _ = pending.contains { modes in
                seen.append(modes)
                return false
            }
            #expect(seen == [nil, [.tracking, "other"], nil, [.default]])
            #expect(pending.contains { $0 == [.default] })
            #expect(!pending.allSatisfy { $0 == nil })
            let tracking = BlockBuffer()
            pending.move(where: { LoopBlock.mayRun(withModes: $0, in: .tracking, modeIsCommon: false) }, to: tracking)
            #expect(tracking.count == 2)
            #expect(tracking.allSatisfy { $0 == [.tracking, "other"] })
            #expect(pending.count == 4)
            Self.runAll(tracking)
            Self.runAll(pending)
        }
        #expect(output.events == [1, 0, 2, 3])
        #expect(Token.live.withLock { $0 } == before)
    }

    @Test func namedModesAreSeenAfterEveryMove() {
        let output = Recorder<Int>()
        let pending = BlockBuffer()
        let common: ([Loop.Mode]?) -> Bool = { $0 == nil }
        // Common blocks only.
        pending.append(Self.block(0, into: output), modes: nil)
        #expect(pending.allSatisfy(common))
        #expect(pending.contains(where: common))
        #expect(!pending.contains { $0 != nil })
        // A named block swapped, appended or moved to another buffer is still seen there.
        let inbox = BlockBuffer()
        inbox.append(Self.block(1, into: output), modes: [.tracking])
        let spare = BlockBuffer()
        spare.exchange(with: inbox)
        #expect(inbox.allSatisfy(common))
        #expect(!spare.allSatisfy(common))
        pending.append(movingFrom: spare)
        #expect(spare.allSatisfy(common) && spare.isEmpty)
        #expect(!pending.allSatisfy(common))
        #expect(pending.contains { $0 == [.tracking] })
        let runnable = BlockBuffer()
        pending.move(where: { $0 == nil }, to: runnable)
        #expect(runnable.allSatisfy(common))
        #expect(!pending.allSatisfy(common))
        pending.move(where: { _ in true }, to: runnable)
        #expect(!runnable.allSatisfy(common))
        #expect(pending.isEmpty && pending.allSatisfy(common))
        // Once drained, a buffer of common blocks is answered as such again.
        Self.runAll(runnable)
        runnable.append(Self.block(2, into: output), modes: nil)
        #expect(runnable.allSatisfy(common))
        Self.runAll(runnable)
        #expect(output.events == [0, 1, 2])
    }

    @Test func blocksMayRunInTheirModesOnly() {
        #expect(LoopBlock.mayRun(withModes: nil, in: .default, modeIsCommon: true))
        #expect(!LoopBlock.mayRun(withModes: nil, in: "private", modeIsCommon: false))
        #expect(LoopBlock.mayRun(withModes: [.tracking, "other"], in: "other", modeIsCommon: false))
        #expect(!LoopBlock.mayRun(withModes: [.tracking], in: .default, modeIsCommon: true))
        #expect(LoopBlock.mayRun(withModes: [.common], in: .default, modeIsCommon: true))
    }

    /// The stamp keeps 48 bits of the post time: the time is recovered exactly for any delay
    /// shorter than 2^48 ns (78 hours), wherever the clock stands.
    @Test(arguments: [1, 123_456_789, (1 << 48) - 3, (1 << 48) + 5, (1 << 52) + 77, Int64.max / 2] as [Int64])
    func aStampGivesBackThePostTime(_ posted: Int64) {
        var block = LoopBlock(.taken)
        #expect(!block.isStamped)
        #expect(block.postedAt(now: posted) == 0)
        block.stamp(posted)
        #expect(block.isStamped)
        let delays: [Int64] = [0, 1, 999, 4_294_967_296, 3_600_000_000_000, (1 << 48) - 1]
        for delay in delays {
            #expect(block.postedAt(now: posted + delay) == posted)
        }
    }
}
