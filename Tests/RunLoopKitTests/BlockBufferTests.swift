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

    private static func block(_ value: Int, modes: [Loop.Mode]? = nil, into output: Recorder<Int>) -> LoopBlock {
        let token = Token(value)
        return LoopBlock(modes: modes, body: .closure { output.append(token.value) })
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
                pending.append(Self.block(value, modes: value % 3 == 0 ? [.tracking] : nil, into: output))
            }
            let runnable = BlockBuffer(capacity: 1)
            pending.move(where: { $0.modes == nil }, to: runnable)
            #expect(runnable.count == 66)
            #expect(pending.count == 34)
            #expect(pending.allSatisfy { $0.modes == [.tracking] })
            #expect(!runnable.contains { $0.modes != nil })
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
}
