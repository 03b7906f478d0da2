import HTTPCore
import Testing

/// Parses `text` from its start with a fresh parser.
private func parse(_ text: String, maxHeadLength: Int = HTTPRequestParser.defaultMaxHeadLength) -> HTTPParseResult {
    var parser = HTTPRequestParser(maxHeadLength: maxHeadLength)
    return parser.parse(Array(text.utf8))
}

/// The request head of `text`, or nil with a recorded issue.
private func parsedHead(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> HTTPRequestHead? {
    guard case .request(let head) = parse(text) else {
        Issue.record("not a valid request: \(parse(text))", sourceLocation: sourceLocation)
        return nil
    }
    return head
}

private func target(_ head: HTTPRequestHead, in text: String) -> String {
    String(decoding: Array(text.utf8)[head.target], as: UTF8.self)
}

@Suite("HTTP request parser")
struct HTTPParserTests {
    struct Valid: Sendable, CustomTestStringConvertible {
        var name: String
        var request: String
        var method: HTTPMethod
        var target: String
        var version: HTTPVersion
        var keepAlive: Bool
        var contentLength = 0
        var testDescription: String { name }
    }

    static let valid: [Valid] = [
        Valid(
            name: "minimal GET", request: "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            method: .get, target: "/", version: .http11, keepAlive: true),
        Valid(
            name: "HEAD with query", request: "HEAD /health?x=1 HTTP/1.1\r\nHost: a\r\n\r\n",
            method: .head, target: "/health?x=1", version: .http11, keepAlive: true),
        Valid(
            name: "wrk-like headers",
            request: "GET /health HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n",
            method: .get, target: "/health", version: .http11, keepAlive: true),
        Valid(
            name: "bare LF line ends", request: "GET / HTTP/1.1\nHost: a\n\n",
            method: .get, target: "/", version: .http11, keepAlive: true),
        Valid(
            name: "empty lines before the request line", request: "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            method: .get, target: "/", version: .http11, keepAlive: true),
        Valid(
            name: "whitespace around a value", request: "GET / HTTP/1.1\r\nHost: \t a \t\r\nX-Empty:\r\n\r\n",
            method: .get, target: "/", version: .http11, keepAlive: true),
        Valid(
            name: "obs-text in a value", request: "GET / HTTP/1.1\r\nHost: a\r\nX: caf\u{e9}\r\n\r\n",
            method: .get, target: "/", version: .http11, keepAlive: true),
        Valid(
            name: "unsupported method", request: "POST /submit HTTP/1.1\r\nHost: a\r\n\r\n",
            method: .unsupported, target: "/submit", version: .http11, keepAlive: true),
        Valid(
            name: "lower-case get is another method", request: "get / HTTP/1.1\r\nHost: a\r\n\r\n",
            method: .unsupported, target: "/", version: .http11, keepAlive: true),
        Valid(
            name: "Content-Length body", request: "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
            method: .get, target: "/", version: .http11, keepAlive: true, contentLength: 5),
        Valid(
            name: "repeated equal Content-Length",
            request: "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n",
            method: .get, target: "/", version: .http11, keepAlive: true, contentLength: 5),
        Valid(
            name: "HTTP/1.2 is treated as 1.1", request: "GET / HTTP/1.2\r\nHost: a\r\n\r\n",
            method: .get, target: "/", version: .http11, keepAlive: true),
        Valid(
            name: "HTTP/1.0 without Host", request: "GET / HTTP/1.0\r\n\r\n",
            method: .get, target: "/", version: .http10, keepAlive: false),
        Valid(
            name: "absolute-form target", request: "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
            method: .get, target: "http://a/", version: .http11, keepAlive: true),
    ]

    @Test("valid requests", arguments: valid)
    func validRequests(_ testCase: Valid) throws {
        let head = try #require(parsedHead(testCase.request))
        #expect(head.method == testCase.method)
        #expect(target(head, in: testCase.request) == testCase.target)
        #expect(head.version == testCase.version)
        #expect(head.keepAlive == testCase.keepAlive)
        #expect(head.contentLength == testCase.contentLength)
        #expect(head.length == testCase.request.utf8.count)
    }

    struct Keep: Sendable, CustomTestStringConvertible {
        var request: String
        var keepAlive: Bool
        var testDescription: String { request.split(separator: "\r\n").joined(separator: " | ") }
    }

    static let keepAlive: [Keep] = [
        Keep(request: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", keepAlive: true),
        Keep(request: "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", keepAlive: false),
        Keep(request: "GET / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\n\r\n", keepAlive: false),
        Keep(request: "GET / HTTP/1.1\r\nHost: a\r\nconnection: upgrade, close\r\n\r\n", keepAlive: false),
        Keep(request: "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n", keepAlive: true),
        Keep(request: "GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n", keepAlive: true),
        Keep(request: "GET / HTTP/1.0\r\n\r\n", keepAlive: false),
        Keep(request: "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", keepAlive: true),
        Keep(request: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", keepAlive: true),
        Keep(request: "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", keepAlive: false),
        Keep(request: "GET / HTTP/1.0\r\nConnection: close\r\n\r\n", keepAlive: false),
        Keep(request: "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", keepAlive: false),
    ]

    @Test("HTTP/1.0 and HTTP/1.1 keep-alive, Connection: close", arguments: keepAlive)
    func keepAliveSemantics(_ testCase: Keep) throws {
        let head = try #require(parsedHead(testCase.request))
        #expect(head.keepAlive == testCase.keepAlive)
    }

    static let malformedRequestLines: [String] = [
        "GET\r\nHost: a\r\n\r\n",
        "GET /\r\nHost: a\r\n\r\n",
        "GET / \r\nHost: a\r\n\r\n",
        " GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /  HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
        "GET / http/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/11\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.x\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1x\r\nHost: a\r\n\r\n",
        "G@T / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /a\u{7f}b HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\r\nHost: a\r\n\r\n",
        "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n",
        "\u{0}GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    ]

    @Test("malformed request line: 400", arguments: malformedRequestLines)
    func malformedRequestLine(_ request: String) {
        #expect(parse(request) == .error(.badRequest))
    }

    static let malformedHeaders: [String] = [
        "GET / HTTP/1.1\r\nHost: a\r\nNo colon\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nName : value\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n: no name\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tfolded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nBad(Name): x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{1}b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{7f}\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n\r\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ]

    @Test("malformed header: 400", arguments: malformedHeaders)
    func malformedHeader(_ request: String) {
        #expect(parse(request) == .error(.badRequest))
    }

    /// Values are checked eight bytes at a time where they can be: every byte value at every
    /// position of a 20-byte value (three words, the last overlapping the second) is accepted or
    /// rejected by the rule for one byte: visible, obs-text, space or tab.
    @Test("a field value is checked byte by byte, at every position")
    func fieldValueBytesAtEveryPosition() {
        let head = Array("GET / HTTP/1.1\r\nHost: a\r\nX-Value: ".utf8)
        let tail = Array("\r\n\r\n".utf8)
        let value = Array("abcdefghijklmnopqrst".utf8)
        var mismatches: [String] = []
        for position in value.indices {
            for byte in 0...UInt8.max where byte != UInt8(ascii: "\r") && byte != UInt8(ascii: "\n") {
                // Leading and trailing whitespace is trimmed, not part of the value.
                if (position == 0 || position == value.count - 1) && (byte == 0x20 || byte == 0x09) { continue }
                var bytes = value
                bytes[position] = byte
                var parser = HTTPRequestParser()
                let result = parser.parse(head + bytes + tail)
                let allowed = (byte >= 0x20 || byte == 0x09) && byte != 0x7F
                let accepted: Bool
                switch result {
                case .request: accepted = true
                case .error(.badRequest): accepted = false
                default:
                    mismatches.append("byte \(byte) at \(position): \(result)")
                    continue
                }
                if accepted != allowed { mismatches.append("byte \(byte) at \(position): accepted \(accepted)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10))")
    }

    @Test("HTTP version other than 1.x: 505", arguments: ["HTTP/2.0", "HTTP/0.9", "HTTP/3.1"])
    func unsupportedVersion(_ version: String) {
        #expect(parse("GET / \(version)\r\nHost: a\r\n\r\n") == .error(.httpVersionNotSupported))
    }

    struct Oversized: Sendable, CustomTestStringConvertible {
        var name: String
        var make: @Sendable () -> String
        var expectTooLarge: Bool
        var request: String { make() }
        var testDescription: String { name }

        init(name: String, request: @autoclosure @escaping @Sendable () -> String, expectTooLarge: Bool) {
            self.name = name
            self.make = request
            self.expectTooLarge = expectTooLarge
        }
    }

    static func request(headLength: Int, terminated: Bool = true) -> String {
        let prefix = "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: "
        let suffix = terminated ? "\r\n\r\n" : ""
        return prefix + String(repeating: "p", count: headLength - prefix.utf8.count - 4) + suffix
    }

    static let oversized: [Oversized] = [
        Oversized(name: "head of exactly 8 KiB", request: request(headLength: 8192), expectTooLarge: false),
        Oversized(name: "head of 8 KiB + 1", request: request(headLength: 8193), expectTooLarge: true),
        Oversized(name: "head of 64 KiB", request: request(headLength: 65536), expectTooLarge: true),
        Oversized(
            name: "unterminated head past 8 KiB", request: request(headLength: 8200, terminated: false),
            expectTooLarge: true),
        Oversized(
            name: "one huge header line",
            request: "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "a", count: 9000),
            expectTooLarge: true),
        Oversized(
            name: "endless empty lines", request: String(repeating: "\r\n", count: 5000), expectTooLarge: true),
    ]

    @Test("headers over 8 KiB: 431", arguments: oversized)
    func headersTooLarge(_ testCase: Oversized) {
        let result = parse(testCase.request)
        if testCase.expectTooLarge {
            #expect(result == .error(.requestHeaderFieldsTooLarge))
        } else {
            guard case .request(let head) = result else {
                Issue.record("expected a request, got \(result)")
                return
            }
            #expect(head.length == 8192)
        }
    }

    @Test("an unterminated head under the limit is incomplete, not an error")
    func unterminatedUnderLimit() {
        #expect(parse(Self.request(headLength: 8000, terminated: false)) == .incomplete)
    }

    @Test("pipelined requests in one buffer")
    func pipelined() throws {
        let requests = [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "HEAD /health HTTP/1.1\r\nHost: a\r\n\r\n",
            "DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        ]
        let bytes = Array(requests.joined().utf8) + Array("GET /partial HTTP/1.1\r\nHo".utf8)
        var parser = HTTPRequestParser()
        var offset = 0
        var seen: [(HTTPMethod, String, Bool)] = []
        try bytes.withUnsafeBytes { all in
            while true {
                let rest = UnsafeRawBufferPointer(rebasing: all[offset...])
                let result = parser.parse(rest)
                if result == .incomplete { break }
                guard case .request(let head) = result else {
                    Issue.record("unexpected \(result)")
                    return
                }
                let target = String(decoding: rest[head.target], as: UTF8.self)
                seen.append((head.method, target, head.keepAlive))
                offset += head.length
                try #require(seen.count <= requests.count)
            }
        }
        #expect(seen.map(\.0) == [.get, .head, .unsupported, .get])
        #expect(seen.map(\.1) == ["/", "/health", "/x", "/last"])
        #expect(seen.map(\.2) == [true, true, true, false])
        #expect(offset == requests.joined().utf8.count)
    }

    @Test(
        "partial requests across reads: every split point",
        arguments: [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /health HTTP/1.0\r\nConnection: keep-alive\r\nX-Long-Header-Name: some longer value here\r\n\r\n",
            "\r\nGET / HTTP/1.1\nHost: a\n\n",
            "GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n",
        ])
    func partialAcrossReads(_ request: String) {
        let bytes = Array(request.utf8)
        let whole = parse(request)
        for split in 1..<bytes.count {
            var parser = HTTPRequestParser()
            let first = parser.parse(Array(bytes[..<split]))
            #expect(first == .incomplete, "prefix of \(split) bytes")
            #expect(parser.parse(bytes) == whole, "split at \(split)")
        }
        // One byte per read.
        var parser = HTTPRequestParser()
        var result = HTTPParseResult.incomplete
        for end in 1...bytes.count {
            result = parser.parse(Array(bytes[..<end]))
            if end < bytes.count { #expect(result == .incomplete) }
        }
        #expect(result == whole)
    }

    @Test("a parser resets after a request and after an error")
    func resetsAfterResult() {
        var parser = HTTPRequestParser()
        #expect(parser.parse(Array("GET / HTTP/1.1\r\nHo".utf8)) == .incomplete)
        #expect(parser.parse(Array("BAD\r\n\r\n".utf8)) == .error(.badRequest))
        guard case .request = parser.parse(Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)) else {
            Issue.record("a parser must be reusable after an error")
            return
        }
    }

    @Test("a smaller limit applies")
    func customLimit() {
        #expect(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n", maxHeadLength: 16) == .error(.requestHeaderFieldsTooLarge))
        #expect(parse("GET / HTTP/1.1\r\nHo", maxHeadLength: 16) == .error(.requestHeaderFieldsTooLarge))
    }
}
