/// The responses this server sends, serialised once, with their `Date` field patched in place.
///
/// Every response is static, so each variant — kind × keep-alive or close × with or without body
/// (HEAD) — is prepared once in one contiguous allocation, and a response is sent by copying its
/// bytes. `updateDate(epochSeconds:)` rewrites the 29 bytes of the `Date` field of every variant
/// when the second changes. Not thread-safe: give each event loop its own table.
public final class HTTPResponseTable {
    /// What a response says.
    public enum Kind: Int, CaseIterable, Sendable {
        /// `GET /`: 200, `Hello, World!`.
        case hello
        /// `GET /health`: 200, `OK`.
        case health
        /// Any other target: 404.
        case notFound
        /// A method other than GET and HEAD: 405 with `Allow: GET, HEAD`.
        case methodNotAllowed
        /// A malformed request: 400.
        case badRequest
        /// A request head over the limit: 431.
        case headersTooLarge
        /// A version other than HTTP/1.x: 505.
        case versionNotSupported

        /// The status of this response.
        public var status: HTTPStatus {
            switch self {
            case .hello, .health: .ok
            case .notFound: .notFound
            case .methodNotAllowed: .methodNotAllowed
            case .badRequest: .badRequest
            case .headersTooLarge: .requestHeaderFieldsTooLarge
            case .versionNotSupported: .httpVersionNotSupported
            }
        }

        /// The body (text/plain).
        public var body: String {
            switch self {
            case .hello: "Hello, World!"
            case .health: "OK"
            default: status.reasonPhrase
            }
        }

        /// The response to a parse error.
        public init(error status: HTTPStatus) {
            switch status {
            case .requestHeaderFieldsTooLarge: self = .headersTooLarge
            case .httpVersionNotSupported: self = .versionNotSupported
            case .notFound: self = .notFound
            case .methodNotAllowed: self = .methodNotAllowed
            case .ok, .badRequest: self = .badRequest
            }
        }

        /// The response to a valid request: by method, then by path (`/` or `/health`; a query is
        /// ignored), else 404.
        public static func route(_ head: HTTPRequestHead, in bytes: UnsafeRawBufferPointer) -> Kind {
            guard head.method != .unsupported else { return .methodNotAllowed }
            guard let base = bytes.baseAddress else { return .notFound }
            var end = head.target.lowerBound
            while end < head.target.upperBound && base.byte(end) != UInt8(ascii: "?") { end += 1 }
            let start = head.target.lowerBound
            switch end - start {
            case 1 where base.byte(start) == UInt8(ascii: "/"): return .hello
            case 7 where HTTPBytes.equals(base, start, "/health"): return .health
            default: return .notFound
            }
        }
    }

    private struct Entry {
        var offset: Int
        var length: Int
        var dateOffset: Int
    }

    private let storage: UnsafeMutableRawBufferPointer
    private let entries: UnsafeMutablePointer<Entry>
    private let entryCount: Int
    /// The second the `Date` fields show (behind a pointer: no exclusivity check on the hot path).
    private let shownSeconds: UnsafeMutablePointer<Int>

    /// The second the `Date` fields currently show.
    public var dateSeconds: Int { shownSeconds.pointee }

    /// Serialises every variant with the `Date` of `epochSeconds` (seconds since 1970, UTC).
    public init(epochSeconds: Int = 0) {
        var bytes: [UInt8] = []
        var entries: [Entry] = []
        for kind in Kind.allCases {
            for keepAlive in [true, false] {
                for headOnly in [false, true] {
                    var text = "HTTP/1.1 \(kind.status.rawValue) \(kind.status.reasonPhrase)\r\n"
                    text += "Content-Type: text/plain\r\n"
                    text += "Content-Length: \(kind.body.utf8.count)\r\n"
                    text += "Date: "
                    let dateOffset = bytes.count + text.utf8.count
                    text += String(repeating: "-", count: HTTPDate.length) + "\r\n"
                    text += keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n"
                    if kind == .methodNotAllowed { text += "Allow: GET, HEAD\r\n" }
                    text += "\r\n"
                    if !headOnly { text += kind.body }
                    entries.append(Entry(offset: bytes.count, length: text.utf8.count, dateOffset: dateOffset))
                    bytes.append(contentsOf: text.utf8)
                }
            }
        }
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 64)
        storage.copyBytes(from: bytes)
        self.entries = UnsafeMutablePointer<Entry>.allocate(capacity: entries.count)
        self.entries.initialize(from: entries, count: entries.count)
        entryCount = entries.count
        shownSeconds = .allocate(capacity: 1)
        shownSeconds.initialize(to: epochSeconds)
        writeDate(epochSeconds)
    }

    deinit {
        entries.deinitialize(count: entryCount)
        entries.deallocate()
        storage.deallocate()
        shownSeconds.deallocate()
    }

    /// The bytes of a response. Valid until the next `updateDate` (which rewrites them in place) or
    /// until the table is released; copy them out before either.
    @inline(__always)
    public func response(_ kind: Kind, keepAlive: Bool, headOnly: Bool) -> UnsafeRawBufferPointer {
        let entry = entries[kind.rawValue &* 4 &+ (keepAlive ? 0 : 2) &+ (headOnly ? 1 : 0)]
        return UnsafeRawBufferPointer(rebasing: storage[entry.offset..<entry.offset &+ entry.length])
    }

    /// Makes every `Date` field show `epochSeconds`; does nothing if it already does.
    @inline(__always)
    public func updateDate(epochSeconds: Int) {
        if epochSeconds != shownSeconds.pointee {
            shownSeconds.pointee = epochSeconds
            writeDate(epochSeconds)
        }
    }

    private func writeDate(_ epochSeconds: Int) {
        guard let base = storage.baseAddress else { return }
        HTTPDate.write(epochSeconds: epochSeconds, to: base + entries[0].dateOffset)
        for index in 1..<entryCount {
            (base + entries[index].dateOffset).copyMemory(
                from: base + entries[0].dateOffset, byteCount: HTTPDate.length)
        }
    }
}

/// The HTTP date format (IMF-fixdate, RFC 9110 section 5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
public enum HTTPDate {
    /// Every IMF-fixdate is 29 bytes long.
    public static let length = 29

    /// Writes the IMF-fixdate of `epochSeconds` (seconds since 1970-01-01 UTC, not negative) as 29
    /// ASCII bytes at `destination`.
    public static func write(epochSeconds: Int, to destination: UnsafeMutableRawPointer) {
        let seconds = max(epochSeconds, 0)
        let days = seconds / 86_400
        let secondOfDay = seconds % 86_400
        let weekday = (days + 4) % 7  // 1970-01-01 was a Thursday; 0 is Sunday
        // Civil date from days since the epoch (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        let out = destination.assumingMemoryBound(to: UInt8.self)
        let weekdays: StaticString = "SunMonTueWedThuFriSat"
        let months: StaticString = "JanFebMarAprMayJunJulAugSepOctNovDec"
        for k in 0..<3 { out[k] = weekdays.utf8Start[weekday * 3 + k] }
        out[3] = UInt8(ascii: ",")
        out[4] = UInt8(ascii: " ")
        twoDigits(day, out + 5)
        out[7] = UInt8(ascii: " ")
        for k in 0..<3 { out[8 + k] = months.utf8Start[(month - 1) * 3 + k] }
        out[11] = UInt8(ascii: " ")
        twoDigits((year / 100) % 100, out + 12)
        twoDigits(year % 100, out + 14)
        out[16] = UInt8(ascii: " ")
        twoDigits(secondOfDay / 3600, out + 17)
        out[19] = UInt8(ascii: ":")
        twoDigits(secondOfDay / 60 % 60, out + 20)
        out[22] = UInt8(ascii: ":")
        twoDigits(secondOfDay % 60, out + 23)
        out[25] = UInt8(ascii: " ")
        out[26] = UInt8(ascii: "G")
        out[27] = UInt8(ascii: "M")
        out[28] = UInt8(ascii: "T")
    }

    /// The IMF-fixdate of `epochSeconds` as a string.
    public static func string(epochSeconds: Int) -> String {
        var bytes = [UInt8](repeating: 0, count: length)
        bytes.withUnsafeMutableBytes { write(epochSeconds: epochSeconds, to: $0.baseAddress!) }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func twoDigits(_ value: Int, _ out: UnsafeMutablePointer<UInt8>) {
        out[0] = UInt8(truncatingIfNeeded: 0x30 + value / 10)
        out[1] = UInt8(truncatingIfNeeded: 0x30 + value % 10)
    }
}
