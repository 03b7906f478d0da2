// libFuzzer entry point for HTTPCore's request parser and processor.
//
// Built by `make fuzz` with `swiftc -sanitize=fuzzer,address -parse-as-library`, compiled together
// with the HTTPCore sources into one module (not through SwiftPM). Every input is checked for:
//   - no trap and no memory error (AddressSanitizer) in the parser or the processor;
//   - a parsed head lies within the input and within the head-size limit, with a non-empty target
//     inside it and a non-negative Content-Length;
//   - `.incomplete` only while the input is shorter than the head-size limit;
//   - the same result when the input arrives in two reads, split at a point taken from the data
//     (and, when the first read already completes the head, that result is the final one);
//   - the processor writes the same responses, consumes the same bytes and closes alike whether
//     the stream arrives whole or in two reads, and never answers more requests than there are
//     line feeds (plus one error for a head cut off by the limit).
// Each check runs with the default 8 KiB limit and with a 64-byte one (so the 431 path is reached
// with small inputs).

/// One response table for every run: its Date header stays fixed, so outputs compare byte for byte.
private let table = HTTPResponseTable(epochSeconds: 0)

/// The split point of an input of `count` bytes: a hash of the bytes, in 1..<count.
private func splitPoint(_ bytes: UnsafeRawBufferPointer) -> Int {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return 1 + Int(hash % UInt64(bytes.count - 1))
}

private func checkParser(_ bytes: UnsafeRawBufferPointer, maxHeadLength: Int) {
    var parser = HTTPRequestParser(maxHeadLength: maxHeadLength)
    let result = parser.parse(bytes)
    switch result {
    case .request(let head):
        precondition(head.length > 0 && head.length <= bytes.count, "head length outside the input")
        precondition(head.length <= maxHeadLength, "head longer than the limit")
        precondition(!head.target.isEmpty, "empty target")
        precondition(head.target.lowerBound >= 0 && head.target.upperBound <= head.length, "target outside the head")
        precondition(head.contentLength >= 0, "negative Content-Length")
        precondition(!(head.hasTransferEncoding && head.keepAlive), "keep-alive with Transfer-Encoding")
    case .incomplete:
        precondition(bytes.count < maxHeadLength, "incomplete although the limit is reached")
    case .error(let status):
        precondition(
            status == .badRequest || status == .requestHeaderFieldsTooLarge || status == .httpVersionNotSupported,
            "unexpected error status")
    }
    // The parser resets itself after a result: the same bytes again give the same result.
    if result != .incomplete { precondition(parser.parse(bytes) == result, "not deterministic") }

    guard bytes.count > 1 else { return }
    let split = splitPoint(bytes)
    var pieces = HTTPRequestParser(maxHeadLength: maxHeadLength)
    let first = pieces.parse(UnsafeRawBufferPointer(rebasing: bytes[..<split]))
    if first == .incomplete {
        precondition(pieces.parse(bytes) == result, "split input parsed differently")
    } else {
        precondition(first == result, "a head complete in the first read parsed differently whole")
    }
}

/// Runs the processor over `chunks` fed one after another; returns the output, the bytes left
/// unconsumed and whether the connection was closed.
private func runProcessor(
    _ bytes: UnsafeRawBufferPointer, splitAt splits: [Int], maxHeadLength: Int
) -> (output: [UInt8], responses: Int, left: Int, close: Bool) {
    var processor = HTTPRequestProcessor(maxHeadLength: maxHeadLength)
    let input = HTTPByteBuffer(capacity: 64)
    let output = HTTPByteBuffer(capacity: 64)
    var responses = 0
    var start = 0
    for end in splits + [bytes.count] {
        input.append(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
        start = end
        let outcome = processor.process(input.readableBytes, responses: table, into: output)
        precondition(outcome.consumed >= 0 && outcome.consumed <= input.count, "consumed outside the input")
        responses += outcome.responses
        input.consume(outcome.consumed)
        input.compact()
        if outcome.close {
            precondition(input.isEmpty, "closing with bytes left")
            return (Array(output.readableBytes), responses, 0, true)
        }
    }
    return (Array(output.readableBytes), responses, input.count, false)
}

private func checkProcessor(_ bytes: UnsafeRawBufferPointer, maxHeadLength: Int) {
    let whole = runProcessor(bytes, splitAt: [], maxHeadLength: maxHeadLength)
    // Every request answered ends with a line feed; one error (431 for a head too long) may not.
    let lineFeeds = bytes.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
    precondition(whole.responses <= lineFeeds + 1, "more responses than heads")
    guard bytes.count > 1 else { return }
    let split = runProcessor(bytes, splitAt: [splitPoint(bytes)], maxHeadLength: maxHeadLength)
    precondition(split.output == whole.output, "split stream answered differently")
    precondition(split.responses == whole.responses, "split stream: different number of responses")
    precondition(split.close == whole.close, "split stream: different close")
    precondition(split.left == whole.left, "split stream: different bytes left")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    for limit in [HTTPRequestParser.defaultMaxHeadLength, 64] {
        checkParser(bytes, maxHeadLength: limit)
        checkProcessor(bytes, maxHeadLength: limit)
    }
    return 0
}
