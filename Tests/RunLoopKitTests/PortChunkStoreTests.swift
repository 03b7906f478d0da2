import Glibc
import Testing

@testable import RunLoopKit

@Suite struct PortChunkStoreTests {
    /// Blocks are distinct, start on a page and are cut from mappings of the store's own; given
    /// back, the first `residentLimit` keep their memory (and bytes) and the rest go back to the
    /// kernel (they read as zeros; under AddressSanitizer all are marked released instead); taken
    /// again, they are the same blocks, with no new mapping.
    @Test func blocksAreKeptUpToTheLimitAndDiscardedBeyondIt() {
        let store = PortChunkStore(blocksPerMapping: 4, residentLimit: 3)
        let bytes = PortChunkStore.blockBytes
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let fresh = (0..<12).map { _ in store.take() }
        #expect(fresh.allSatisfy { $0.isZeroed })
        let blocks = fresh.map(\.block)
        #expect(Set(blocks).count == 12)
        #expect(blocks.allSatisfy { Int(bitPattern: $0) % page == 0 })
        #expect(store.counts.mappings == 3)
        for block in blocks { memset(block, 0xAB, bytes) }

        for block in blocks { store.give(block) }
        #expect(store.counts.resident == 3)
        #expect(store.counts.discarded == 9)
        if Platform.checksAddresses {
            // Under AddressSanitizer, every block given back is marked released, but for the link
            // at the start of a resident one: touching it is reported.
            for block in blocks {
                #expect(Platform.isMarkedReleased(block + 8))
                #expect(Platform.isMarkedReleased(block + bytes - 1))
            }
            #expect(!Platform.isMarkedReleased(blocks[0]))
        } else {
            // The first three given back were kept: their bytes are as written, past the link.
            for block in blocks[0..<3] {
                #expect(block.load(fromByteOffset: bytes - 1, as: UInt8.self) == 0xAB)
                #expect(block.load(fromByteOffset: 8, as: UInt8.self) == 0xAB)
            }
            // The others' memory went back to the kernel.
            for block in blocks[3...] {
                #expect(block.load(fromByteOffset: 0, as: UInt8.self) == 0)
                #expect(block.load(fromByteOffset: bytes / 2, as: UInt8.self) == 0)
                #expect(block.load(fromByteOffset: bytes - 1, as: UInt8.self) == 0)
            }
        }

        // Resident blocks first, the last given first; then the discarded ones.
        let taken = (0..<12).map { _ in store.take() }
        // The resident ones hold their last user's bytes; the discarded ones are zeros again.
        #expect(taken.map { $0.isZeroed } == Array(repeating: false, count: 3) + Array(repeating: true, count: 9))
        let again = taken.map(\.block)
        #expect(Array(again[0..<3]) == [blocks[2], blocks[1], blocks[0]])
        #expect(Set(again) == Set(blocks))
        #expect(store.counts.mappings == 3)
        #expect(store.counts.resident == 0 && store.counts.discarded == 0)
        #expect(again.allSatisfy { !Platform.isMarkedReleased($0 + bytes - 1) })
        // One more block needs a new mapping.
        let another = store.take().block
        #expect(!blocks.contains(another))
        #expect(store.counts.mappings == 4)
        for block in again + [another] { store.give(block) }
    }

    /// Threads taking and giving blocks at once never get the same block twice.
    @Test func threadsNeverShareABlock() async {
        let store = PortChunkStore(blocksPerMapping: 8, residentLimit: 16)
        let clashes = await withTaskGroup(of: Int.self) { group in
            for thread in 0..<4 {
                group.addTask {
                    var clashes = 0
                    for round in 0..<2_000 {
                        let held = (0..<(1 + round % 24)).map { _ in store.take().block }
                        // Marks each block as this thread's, then checks no other thread marked it.
                        for block in held { block.storeBytes(of: thread, toByteOffset: 64, as: Int.self) }
                        for block in held where block.load(fromByteOffset: 64, as: Int.self) != thread {
                            clashes += 1
                        }
                        for block in held { store.give(block) }
                    }
                    return clashes
                }
            }
            return await group.reduce(0, +)
        }
        #expect(clashes == 0)
        #expect(store.counts.resident == 16)
    }
}
