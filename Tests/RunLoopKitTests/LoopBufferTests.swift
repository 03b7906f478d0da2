import Testing

@testable import RunLoopKit

@Suite struct LoopBufferTests {
    @Test func appendReadAndConsume() {
        var buffer = LoopBuffer()
        #expect(buffer.isEmpty)
        buffer.append(Array("hello, ".utf8))
        buffer.append("world".utf8)
        #expect(buffer.count == 12)
        #expect(buffer.read(maxLength: 5) == Array("hello".utf8))
        buffer.consume(2)
        #expect(buffer.read(maxLength: 100) == Array("world".utf8))
        #expect(buffer.isEmpty)
        #expect(buffer.read(maxLength: 0) == [])
    }

    @Test func linesEndInLFOrCRLF() {
        var buffer = LoopBuffer(Array("one\r\ntwo\nthr".utf8))
        #expect(buffer.readLine() == Array("one".utf8))
        #expect(buffer.readLine() == Array("two".utf8))
        #expect(buffer.readLine() == nil)
        #expect(buffer.count == 3)
        buffer.append("ee\n".utf8)
        #expect(buffer.readLine() == Array("three".utf8))
    }

    @Test func searchAndContiguousBytesAcrossBlocks() {
        var buffer = LoopBuffer()
        // Blocks of different appends: a pattern that spans them is still found.
        for _ in 0..<100 { buffer.append([UInt8](repeating: 0x61, count: 1000)) }
        buffer.append("\r\n\r\n".utf8)
        #expect(buffer.firstIndex(of: Array("\r\n\r\n".utf8)) == 100_000)
        #expect(buffer.firstIndex(of: [0x62]) == nil)
        #expect(buffer.firstIndex(of: [UInt8]()) == 0)
        let sum = buffer.withContiguousBytes(upTo: 50_000) { bytes in bytes.reduce(0) { $0 + Int($1) } }
        #expect(sum == 50_000 * 0x61)
        #expect(buffer.withContiguousBytes(upTo: 1 << 30) { $0.count } == 100_004)
        #expect(buffer.count == 100_004)
    }

    @Test func copiesAreIndependentAndMovesEmptyTheSource() {
        var first = LoopBuffer(Array("abc".utf8))
        var copy = first
        copy.append("def".utf8)
        #expect(first.count == 3)
        #expect(copy.count == 6)
        var target = LoopBuffer(Array("x".utf8))
        target.append(&copy)
        #expect(copy.isEmpty)
        #expect(target.read(maxLength: 10) == Array("xabcdef".utf8))
        #expect(first.read(maxLength: 10) == Array("abc".utf8))
    }

    @Test func negativeSizesAreProgrammerErrors() async {
        await #expect(processExitsWith: .failure) {
            var buffer = LoopBuffer()
            _ = buffer.read(maxLength: -1)
        }
        await #expect(processExitsWith: .failure) {
            var buffer = LoopBuffer(Array("ab".utf8))
            buffer.consume(3)
        }
        await #expect(processExitsWith: .failure) {
            var buffer = LoopBuffer()
            buffer.withContiguousBytes(upTo: -4) { _ in }
        }
    }

    /// Collections without contiguous storage (a lazy map) are appended and searched for as well.
    @Test func nonContiguousCollectionsAreAppendedAndFound() {
        var buffer = LoopBuffer()
        buffer.append((0..<5).lazy.map { UInt8($0) })
        #expect(buffer.count == 5)
        #expect(buffer.firstIndex(of: (3...4).lazy.map { UInt8($0) }) == 3)
        #expect(buffer.firstIndex(of: (7...8).lazy.map { UInt8($0) }) == nil)
        #expect(buffer.read(maxLength: 10) == [0, 1, 2, 3, 4])
    }
}
