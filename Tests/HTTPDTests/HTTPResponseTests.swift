import HTTPCore
import Testing

/// Runs `chunks` through one processor as successive reads and returns the output text and the
/// outcome of each call.
private func process(
    _ chunks: [String], allowKeepAlive: Bool = true
) -> (output: String, outcomes: [HTTPRequestProcessor.Outcome]) {
    let table = HTTPResponseTable(epochSeconds: 784_111_777)
    let input = HTTPByteBuffer(capacity: 16_384)
    let output = HTTPByteBuffer(capacity: 64)
    var processor = HTTPRequestProcessor()
    var outcomes: [HTTPRequestProcessor.Outcome] = []
    for chunk in chunks {
        input.append(Array(chunk.utf8))
        let outcome = processor.process(
            input.readableBytes, responses: table, into: output, allowKeepAlive: allowKeepAlive)
        input.consume(outcome.consumed)
        outcomes.append(outcome)
        if outcome.close { break }
    }
    return (String(decoding: Array(output.readableBytes), as: UTF8.self), outcomes)
}

/// The status lines of the responses in `output`, in order (bodies do not end in a line break, so
/// a status line may follow a body directly).
private func statusLines(_ output: String) -> [String] {
    let bytes = Array(output.utf8)
    let marker = Array("HTTP/1.1 ".utf8)
    var lines: [String] = []
    var i = 0
    while i + marker.count <= bytes.count {
        guard Array(bytes[i..<i + marker.count]) == marker else {
            i += 1
            continue
        }
        var end = i
        while end + 1 < bytes.count && !(bytes[end] == 13 && bytes[end + 1] == 10) { end += 1 }
        lines.append(String(decoding: bytes[i..<end], as: UTF8.self))
        i = end
    }
    return lines
}

@Suite("HTTP responses and request processing")
struct HTTPResponseTests {
    @Test(
        "IMF-fixdate formatting",
        arguments: [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (1_700_000_000, "Tue, 14 Nov 2023 22:13:20 GMT"),
            (4_102_444_799, "Thu, 31 Dec 2099 23:59:59 GMT"),
        ])
    func date(_ seconds: Int, _ expected: String) {
        #expect(HTTPDate.string(epochSeconds: seconds) == expected)
    }

    @Test("the response table holds complete responses with the current date")
    func responseTable() {
        let table = HTTPResponseTable(epochSeconds: 784_111_777)
        let hello = String(decoding: Array(table.response(.hello, keepAlive: true, headOnly: false)), as: UTF8.self)
        #expect(
            hello == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
                + "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: keep-alive\r\n\r\nHello, World!")
        let head = String(decoding: Array(table.response(.hello, keepAlive: false, headOnly: true)), as: UTF8.self)
        #expect(
            head.hasSuffix("Content-Length: 13\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\n\r\n"))
        let notAllowed = String(
            decoding: Array(table.response(.methodNotAllowed, keepAlive: true, headOnly: false)), as: UTF8.self)
        #expect(notAllowed.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"))
        #expect(notAllowed.contains("\r\nAllow: GET, HEAD\r\n"))
        table.updateDate(epochSeconds: 0)
        let later = String(decoding: Array(table.response(.health, keepAlive: true, headOnly: false)), as: UTF8.self)
        #expect(later.contains("\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n"))
        #expect(later.hasSuffix("\r\n\r\nOK"))
    }

    @Test("routing: /, /health, 404, 405")
    func routing() {
        let (output, outcomes) = process([
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
                + "GET /health HTTP/1.1\r\nHost: a\r\n\r\n"
                + "GET /?q=1 HTTP/1.1\r\nHost: a\r\n\r\n"
                + "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"
                + "POST / HTTP/1.1\r\nHost: a\r\n\r\n"
                + "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n"
        ])
        #expect(
            statusLines(output) == [
                "HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found",
                "HTTP/1.1 405 Method Not Allowed", "HTTP/1.1 200 OK",
            ])
        #expect(outcomes == [.init(consumed: outcomes[0].consumed, responses: 6, close: false)])
        #expect(output.hasSuffix("Connection: keep-alive\r\n\r\n"))  // HEAD: no body
    }

    @Test("a request split across reads is answered once complete")
    func splitRequest() {
        let (output, outcomes) = process(["GET / HT", "TP/1.1\r\nHost:", " a\r\n", "\r\nGET /health HTTP/1.1\r\n"])
        #expect(outcomes.map(\.responses) == [0, 0, 0, 1])
        #expect(statusLines(output) == ["HTTP/1.1 200 OK"])
        #expect(output.hasSuffix("Hello, World!"))
    }

    @Test("request bodies are skipped, even across reads")
    func bodySkipped() {
        let (output, _) = process([
            "POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n01234",
            "56789GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        ])
        #expect(statusLines(output) == ["HTTP/1.1 405 Method Not Allowed", "HTTP/1.1 200 OK"])
    }

    @Test("Connection: close ends processing; what follows is ignored")
    func closeStops() {
        let (output, outcomes) = process([
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /health HTTP/1.1\r\nHost: a\r\n\r\n"
        ])
        #expect(statusLines(output) == ["HTTP/1.1 200 OK"])
        #expect(output.contains("Connection: close\r\n"))
        #expect(outcomes.last?.close == true)
    }

    @Test(
        "errors answer with their status and close",
        arguments: [
            ("BAD\r\n\r\n", 0, "HTTP/1.1 400 Bad Request"),
            ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 0, "HTTP/1.1 505 HTTP Version Not Supported"),
            ("GET / HTTP/1.1\r\nHost: a\r\nX: ", 9000, "HTTP/1.1 431 Request Header Fields Too Large"),
        ])
    func errors(_ start: String, _ padding: Int, _ status: String) {
        // `padding` bytes of header value, then the end of the head.
        let request = padding == 0 ? start : start + String(repeating: "x", count: padding) + "\r\n\r\n"
        let (output, outcomes) = process(["GET / HTTP/1.1\r\nHost: a\r\n\r\n" + request])
        #expect(statusLines(output) == ["HTTP/1.1 200 OK", status])
        #expect(output.hasSuffix("Connection: close\r\n\r\n" + status.split(separator: " ", maxSplits: 2)[2]))
        #expect(outcomes.last?.close == true)
    }

    @Test("HTTP/1.0 gets Connection: close unless it asks for keep-alive")
    func http10() {
        let (closed, closedOutcomes) = process(["GET / HTTP/1.0\r\n\r\n"])
        #expect(closed.contains("Connection: close\r\n"))
        #expect(closedOutcomes.last?.close == true)
        let (kept, keptOutcomes) = process(["GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"])
        #expect(kept.contains("Connection: keep-alive\r\n"))
        #expect(keptOutcomes.last?.close == false)
    }

    @Test("a server shutting down answers with Connection: close")
    func noKeepAlive() {
        let (output, outcomes) = process(["GET / HTTP/1.1\r\nHost: a\r\n\r\n"], allowKeepAlive: false)
        #expect(output.contains("Connection: close\r\n"))
        #expect(outcomes.last?.close == true)
    }
}
