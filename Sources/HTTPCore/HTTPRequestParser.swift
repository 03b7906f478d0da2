/// Parses HTTP/1.1 request heads in place, over bytes the caller owns.
///
/// Call `parse` with the unconsumed bytes of a connection, starting at the first byte of a
/// request. While the head is incomplete it returns `.incomplete` and remembers how far it has
/// scanned, so calling again with the same bytes plus more resumes where it stopped: a head that
/// arrives in many small reads is scanned once. On `.request` or `.error` it resets itself for the
/// next request. It allocates nothing.
///
/// Accepted: `method SP request-target SP HTTP/1.x CRLF`, header fields `name: value CRLF`, an empty
/// line; bare `LF` line ends are accepted too, as are empty lines before the request line.
/// Rejected with 400: anything else in the request line, a header name that is not a token or is
/// followed by whitespace before the colon, obsolete line folding, control characters in a value,
/// a malformed or conflicting `Content-Length`, `Transfer-Encoding` together with `Content-Length`
/// or in HTTP/1.0, and an HTTP/1.1 request without exactly one `Host`. A version other than 1.x
/// gives 505; a head longer than `maxHeadLength` bytes gives 431.
public struct HTTPRequestParser: Sendable {
    /// The default limit on the size of a request head (request line and header fields): 8 KiB.
    public static let defaultMaxHeadLength = 8 * 1024

    /// The largest request head accepted, in bytes; longer heads are answered with 431.
    public let maxHeadLength: Int

    // Resumable scan state, as offsets into the bytes passed to `parse`.
    /// How far the search for line ends has gone.
    private var scanned = 0
    /// Where the line being scanned starts.
    private var lineStart = 0
    /// Where the request line starts, or -1 while only empty lines have been seen.
    private var requestStart = -1

    public init(maxHeadLength: Int = HTTPRequestParser.defaultMaxHeadLength) {
        precondition(maxHeadLength > 0, "HTTPRequestParser: maxHeadLength must be positive")
        self.maxHeadLength = maxHeadLength
    }

    /// Forgets a partly scanned head: the next `parse` starts from the first byte.
    public mutating func reset() {
        scanned = 0
        lineStart = 0
        requestStart = -1
    }

    /// Parses the request head at the start of `bytes`.
    ///
    /// `bytes` must start where the previous request ended and, after `.incomplete`, must hold the
    /// same bytes as before followed by any new ones.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer) -> HTTPParseResult {
        let count = bytes.count
        guard let base = bytes.baseAddress, count > 0 else { return .incomplete }
        if scanned > count { reset() }  // not the bytes of the previous call: start over
        // A head that ends after `maxHeadLength` is too large whatever follows: search no further.
        let searchEnd = min(count, maxHeadLength)
        var position = scanned
        while let lineFeed = HTTPBytes.firstLineFeed(base, from: position, to: searchEnd) {
            var lineEnd = lineFeed
            if lineEnd > lineStart && base.load(fromByteOffset: lineEnd - 1, as: UInt8.self) == HTTPBytes.cr {
                lineEnd -= 1
            }
            position = lineFeed + 1
            if lineEnd == lineStart {
                if requestStart < 0 {
                    // An empty line before the request line is ignored (RFC 9112, section 2.2).
                    lineStart = position
                    continue
                }
                let start = requestStart
                reset()
                return HTTPRequestParser.parseHead(base, from: start, to: position)
            }
            if requestStart < 0 { requestStart = lineStart }
            lineStart = position
        }
        if count >= maxHeadLength {
            reset()
            return .error(.requestHeaderFieldsTooLarge)
        }
        scanned = count
        return .incomplete
    }

    /// Parses the request head at the start of `bytes` (a convenience for tests and tools).
    public mutating func parse(_ bytes: [UInt8]) -> HTTPParseResult {
        bytes.withUnsafeBytes { parse($0) }
    }

    // MARK: The head

    /// Parses a complete head: the request line at `start`, header fields, the empty line that ends
    /// at `end`. The reported length counts from offset 0 (leading empty lines included).
    private static func parseHead(_ p: UnsafeRawPointer, from start: Int, to end: Int) -> HTTPParseResult {
        // Request line: method SP request-target SP HTTP-version.
        guard let requestLineFeed = HTTPBytes.firstLineFeed(p, from: start, to: end) else {
            return .error(.badRequest)
        }
        let lineEnd = HTTPBytes.trimCarriageReturn(p, start, requestLineFeed)
        var i = start
        while i < lineEnd && HTTPBytes.isTokenChar(p.byte(i)) { i += 1 }
        guard i > start, i < lineEnd, p.byte(i) == HTTPBytes.space else { return .error(.badRequest) }
        let method = HTTPBytes.method(p, start, i)
        i += 1
        let targetStart = i
        while i < lineEnd && HTTPBytes.isTargetChar(p.byte(i)) { i += 1 }
        guard i > targetStart, i < lineEnd, p.byte(i) == HTTPBytes.space else { return .error(.badRequest) }
        let target = targetStart..<i
        i += 1
        // HTTP-version: exactly "HTTP/" DIGIT "." DIGIT.
        guard lineEnd - i == 8, HTTPBytes.equals(p, i, "HTTP/"),
            HTTPBytes.isDigit(p.byte(i + 5)), p.byte(i + 6) == UInt8(ascii: "."), HTTPBytes.isDigit(p.byte(i + 7))
        else { return .error(.badRequest) }
        guard p.byte(i + 5) == UInt8(ascii: "1") else { return .error(.httpVersionNotSupported) }
        let version: HTTPVersion = p.byte(i + 7) == UInt8(ascii: "0") ? .http10 : .http11

        // Header fields, up to the empty line.
        var fields = HeaderSummary()
        var lineStart = requestLineFeed + 1
        while true {
            guard let lineFeed = HTTPBytes.firstLineFeed(p, from: lineStart, to: end) else {
                return .error(.badRequest)
            }
            let lineEnd = HTTPBytes.trimCarriageReturn(p, lineStart, lineFeed)
            if lineEnd == lineStart { break }
            guard fields.add(p, lineStart, lineEnd) else { return .error(.badRequest) }
            lineStart = lineFeed + 1
        }

        // Framing and connection rules (RFC 9112, sections 3.2, 6 and 9.3).
        switch version {
        case .http11: guard fields.hostCount == 1 else { return .error(.badRequest) }
        case .http10: guard fields.hostCount <= 1 else { return .error(.badRequest) }
        }
        if fields.hasTransferEncoding {
            guard version == .http11, fields.contentLength < 0 else { return .error(.badRequest) }
        }
        var keepAlive: Bool
        switch version {
        case .http11: keepAlive = !fields.close
        case .http10: keepAlive = fields.keepAlive && !fields.close
        }
        if fields.hasTransferEncoding { keepAlive = false }
        return .request(
            HTTPRequestHead(
                method: method, version: version, target: target, keepAlive: keepAlive,
                contentLength: max(fields.contentLength, 0), hasTransferEncoding: fields.hasTransferEncoding,
                length: end))
    }

    /// What the header fields said, as far as framing and the connection are concerned.
    private struct HeaderSummary {
        var hostCount = 0
        var contentLength = -1
        var hasTransferEncoding = false
        var close = false
        var keepAlive = false

        /// Adds the field on the line `[start, end)`. Returns false if the line is malformed.
        mutating func add(_ p: UnsafeRawPointer, _ start: Int, _ end: Int) -> Bool {
            // field-name ":" OWS field-value OWS; a line starting with whitespace is obsolete folding.
            var i = start
            while i < end && HTTPBytes.isTokenChar(p.byte(i)) { i += 1 }
            guard i > start, i < end, p.byte(i) == UInt8(ascii: ":") else { return false }
            let nameEnd = i
            i += 1
            while i < end && HTTPBytes.isWhitespace(p.byte(i)) { i += 1 }
            var valueEnd = end
            while valueEnd > i && HTTPBytes.isWhitespace(p.byte(valueEnd - 1)) { valueEnd -= 1 }
            let valueStart = i
            // Eight bytes at a time while they are all visible characters, obs-text or spaces (a
            // tab or a bad byte goes to the byte loop): with the token bitmap, fewer instructions
            // than byte by byte (docs/performance-notes.md#instructions-per-request).
            while i + 8 <= valueEnd && HTTPBytes.allFieldValueBytesButTab(p.word(at: i)) { i += 8 }
            // Fewer than eight left (not a word with a byte to look at): they go as the last eight
            // bytes of the value, when it has eight.
            if i < valueEnd && valueEnd - i < 8 && valueEnd - valueStart >= 8
                && HTTPBytes.allFieldValueBytesButTab(p.word(at: valueEnd - 8))
            {
                i = valueEnd
            }
            while i < valueEnd {
                guard HTTPBytes.isFieldValueChar(p.byte(i)) else { return false }
                i += 1
            }
            switch nameEnd - start {
            case 4:
                if HTTPBytes.equalsIgnoringCase(p, start, "host") { hostCount += 1 }
            case 10:
                if HTTPBytes.equalsIgnoringCase(p, start, "connection") {
                    addConnectionOptions(p, valueStart, valueEnd)
                }
            case 14:
                if HTTPBytes.equalsIgnoringCase(p, start, "content-length") {
                    return addContentLength(p, valueStart, valueEnd)
                }
            case 17:
                if HTTPBytes.equalsIgnoringCase(p, start, "transfer-encoding") { hasTransferEncoding = true }
            default:
                break
            }
            return true
        }

        /// `Connection: a, b, c`: notes `close` and `keep-alive` (case-insensitive).
        mutating func addConnectionOptions(_ p: UnsafeRawPointer, _ start: Int, _ end: Int) {
            var i = start
            while i < end {
                var optionEnd = i
                while optionEnd < end && p.byte(optionEnd) != UInt8(ascii: ",") { optionEnd += 1 }
                var a = i
                var b = optionEnd
                while a < b && HTTPBytes.isWhitespace(p.byte(a)) { a += 1 }
                while b > a && HTTPBytes.isWhitespace(p.byte(b - 1)) { b -= 1 }
                if b - a == 5 && HTTPBytes.equalsIgnoringCase(p, a, "close") { close = true }
                if b - a == 10 && HTTPBytes.equalsIgnoringCase(p, a, "keep-alive") { keepAlive = true }
                i = optionEnd + 1
            }
        }

        /// `Content-Length: DIGITS`; a repeated field must have the same value.
        mutating func addContentLength(_ p: UnsafeRawPointer, _ start: Int, _ end: Int) -> Bool {
            guard end > start, end - start <= 18 else { return false }
            var value = 0
            for i in start..<end {
                let byte = p.byte(i)
                guard HTTPBytes.isDigit(byte) else { return false }
                value = value * 10 + Int(byte &- UInt8(ascii: "0"))
            }
            guard contentLength < 0 || contentLength == value else { return false }
            contentLength = value
            return true
        }
    }
}

extension UnsafeRawPointer {
    @inline(__always)
    func byte(_ offset: Int) -> UInt8 { load(fromByteOffset: offset, as: UInt8.self) }

    /// The eight bytes at `offset`, the first in the lowest bits.
    @inline(__always)
    func word(at offset: Int) -> UInt64 { UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
}

/// Byte classes and searches of HTTP/1.1 syntax (RFC 9110, RFC 9112).
enum HTTPBytes {
    static let cr = UInt8(ascii: "\r")
    static let lf = UInt8(ascii: "\n")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")

    /// The offset of the first `LF` in `[from, to)`, eight bytes at a time.
    @inline(__always)
    static func firstLineFeed(_ p: UnsafeRawPointer, from: Int, to end: Int) -> Int? {
        var i = from
        while i + 8 <= end {
            let word = p.word(at: i)
            // The classic "has a zero byte" test on word XOR "\n\n\n\n\n\n\n\n": the lowest flagged
            // byte is always a true match (false positives only occur above a true one).
            let x = word ^ 0x0A0A_0A0A_0A0A_0A0A
            let found = (x &- 0x0101_0101_0101_0101) & ~x & 0x8080_8080_8080_8080
            if found != 0 { return i + found.trailingZeroBitCount / 8 }
            i += 8
        }
        while i < end {
            if p.byte(i) == lf { return i }
            i += 1
        }
        return nil
    }

    /// The end of the line `[start, lineFeed)` without a final `CR`.
    @inline(__always)
    static func trimCarriageReturn(_ p: UnsafeRawPointer, _ start: Int, _ lineFeed: Int) -> Int {
        lineFeed > start && p.byte(lineFeed - 1) == cr ? lineFeed - 1 : lineFeed
    }

    /// `tchar`: ALPHA / DIGIT / one of ``!#$%&'*+-.^_`|~``.
    @inline(__always)
    static func isTokenChar(_ byte: UInt8) -> Bool {
        // One bit per byte value: 0x00-0x3F `!#$%&'*+-.` and digits, 0x40-0x7F letters and
        // ``^_`|~``. A test and a shift, where the ranges were up to seven compares a byte.
        let bits: UInt64 = byte < 0x40 ? 0x03FF_6CFA_0000_0000 : byte < 0x80 ? 0x57FF_FFFF_C7FF_FFFE : 0
        return bits >> (byte & 0x3F) & 1 != 0
    }

    /// A request-target byte: anything visible (no whitespace, no control character, no DEL).
    @inline(__always)
    static func isTargetChar(_ byte: UInt8) -> Bool { byte > 0x20 && byte != 0x7F }

    /// A field-value byte: visible characters, obs-text, space and tab.
    @inline(__always)
    static func isFieldValueChar(_ byte: UInt8) -> Bool { (byte >= 0x20 || byte == tab) && byte != 0x7F }

    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    /// Whether some byte of `word` is below `limit` (at most 0x80). Exact about whether there is
    /// one, not about which (a borrow may flag a byte above a true one).
    @inline(__always)
    static func hasByte(_ word: UInt64, below limit: UInt8) -> Bool {
        (word &- 0x0101_0101_0101_0101 &* UInt64(limit)) & ~word & 0x8080_8080_8080_8080 != 0
    }

    /// Whether all eight bytes of `word` are field-value bytes other than a tab: none below 0x20
    /// and none 0x7F (DEL).
    @inline(__always)
    static func allFieldValueBytesButTab(_ word: UInt64) -> Bool {
        !hasByte(word, below: 0x20) && !hasByte(word ^ 0x7F7F_7F7F_7F7F_7F7F, below: 1)
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte &- 0x30 < 10 }

    /// The method named by the token `[start, end)`; methods are case-sensitive.
    @inline(__always)
    static func method(_ p: UnsafeRawPointer, _ start: Int, _ end: Int) -> HTTPMethod {
        switch end - start {
        case 3 where equals(p, start, "GET"): .get
        case 4 where equals(p, start, "HEAD"): .head
        default: .unsupported
        }
    }

    /// Whether the bytes at `offset` are `literal`.
    @inline(__always)
    static func equals(_ p: UnsafeRawPointer, _ offset: Int, _ literal: StaticString) -> Bool {
        let expected = literal.utf8Start
        for k in 0..<literal.utf8CodeUnitCount where p.byte(offset + k) != expected[k] {
            return false
        }
        return true
    }

    /// Whether the bytes at `offset` are `lowercase` in any letter case (`lowercase` is lowercase ASCII
    /// letters, digits and `-`).
    @inline(__always)
    static func equalsIgnoringCase(_ p: UnsafeRawPointer, _ offset: Int, _ lowercase: StaticString) -> Bool {
        let expected = lowercase.utf8Start
        for k in 0..<lowercase.utf8CodeUnitCount {
            var byte = p.byte(offset + k)
            if byte &- 0x41 < 26 { byte |= 0x20 }
            if byte != expected[k] { return false }
        }
        return true
    }
}
