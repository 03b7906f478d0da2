import HTTPCore
import Testing

/// SplitMix64: a small deterministic generator, so a failure can be replayed.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("HTTP parser on mutated input")
struct HTTPParserMutationTests {
    static let seeds: [String] = [
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "HEAD /health?x=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
        "GET / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n",
    ]

    /// A random edit of `bytes`: flip, insert, delete, duplicate or truncate.
    private static func mutate(_ bytes: [UInt8], _ random: inout SplitMix64) -> [UInt8] {
        var bytes = bytes
        let interesting: [UInt8] = [0, 9, 10, 13, 32, 44, 58, 63, 127, 128, 255, 0x48, 0x2F]
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            guard !bytes.isEmpty else { break }
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0: bytes[at] = interesting.randomElement(using: &random)!
            case 1: bytes.insert(UInt8.random(in: 0...255, using: &random), at: at)
            case 2: bytes.remove(at: at)
            case 3: bytes.insert(contentsOf: bytes[at..<min(at + 8, bytes.count)], at: at)
            default: bytes.removeLast(Int.random(in: 0...min(3, bytes.count), using: &random))
            }
        }
        return bytes
    }

    @Test("never traps; results stay in bounds; splitting the input does not change the result")
    func mutations() {
        var random = SplitMix64(state: 0x5EED)
        for round in 0..<3000 {
            let seed = Array(Self.seeds[round % Self.seeds.count].utf8)
            let bytes = Self.mutate(seed, &random)
            var whole = HTTPRequestParser(maxHeadLength: 64)
            let result = whole.parse(bytes)
            if case .request(let head) = result {
                #expect(head.length <= bytes.count && head.length <= 64, "\(bytes)")
                #expect(head.target.lowerBound >= 0 && head.target.upperBound <= head.length, "\(bytes)")
                #expect(!head.target.isEmpty)
            }
            // The same bytes in two reads give the same result.
            guard bytes.count > 1 else { continue }
            let split = Int.random(in: 1..<bytes.count, using: &random)
            var pieces = HTTPRequestParser(maxHeadLength: 64)
            let first = pieces.parse(Array(bytes[..<split]))
            if first == .incomplete {
                #expect(pieces.parse(bytes) == result, "split at \(split) of \(bytes)")
            }
        }
    }

    @Test("the processor answers every request of a mutated stream, and never more than one per head")
    func processorOnMutatedStreams() {
        var random = SplitMix64(state: 0xF00D)
        let table = HTTPResponseTable(epochSeconds: 0)
        for _ in 0..<500 {
            var stream: [UInt8] = []
            for _ in 0..<Int.random(in: 1...5, using: &random) {
                stream += Self.mutate(Array(Self.seeds.randomElement(using: &random)!.utf8), &random)
            }
            let input = HTTPByteBuffer(capacity: 16_384)
            let output = HTTPByteBuffer(capacity: 256)
            var processor = HTTPRequestProcessor()
            var offset = 0
            var closed = false
            while offset < stream.count && !closed {
                let end = min(stream.count, offset + Int.random(in: 1...40, using: &random))
                input.append(Array(stream[offset..<end]))
                offset = end
                let outcome = processor.process(input.readableBytes, responses: table, into: output)
                #expect(outcome.consumed <= input.count)
                input.consume(outcome.consumed)
                input.compact()
                closed = outcome.close
            }
            let text = String(decoding: Array(output.readableBytes), as: UTF8.self)
            let responses = text.components(separatedBy: "HTTP/1.1 ").count - 1
            #expect(responses <= stream.count(where: { $0 == 10 }))
        }
    }
}
