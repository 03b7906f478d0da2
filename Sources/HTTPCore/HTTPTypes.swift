// HTTPCore: HTTP/1.1 request parsing and response serialisation for a small static server.
//
// Pure Swift, no Foundation and no event loop: the parser works in place over bytes that the caller
// owns, so it can be driven by any I/O layer (and by a fuzzer). See `HTTPRequestParser`,
// `HTTPRequestProcessor` and `HTTPResponseTable`.

/// A request method, as far as this server cares.
public enum HTTPMethod: UInt8, Sendable, Equatable {
    /// `GET`.
    case get
    /// `HEAD`: the response of `GET` without its body.
    case head
    /// Any other syntactically valid method (`POST`, `PUT`, `BREW`, ...); answered with 405.
    case unsupported
}

/// The protocol version of a request.
public enum HTTPVersion: UInt8, Sendable, Equatable {
    /// `HTTP/1.0`: connections close after each response unless the client asks for keep-alive.
    case http10
    /// `HTTP/1.1` (and any later `HTTP/1.x`): connections stay open unless either side says `close`.
    case http11
}

/// The response statuses this server produces.
public enum HTTPStatus: Int, Sendable, Equatable, CaseIterable {
    case ok = 200
    case badRequest = 400
    case notFound = 404
    case methodNotAllowed = 405
    case requestHeaderFieldsTooLarge = 431
    case httpVersionNotSupported = 505

    /// The reason phrase sent on the status line.
    public var reasonPhrase: String {
        switch self {
        case .ok: "OK"
        case .badRequest: "Bad Request"
        case .notFound: "Not Found"
        case .methodNotAllowed: "Method Not Allowed"
        case .requestHeaderFieldsTooLarge: "Request Header Fields Too Large"
        case .httpVersionNotSupported: "HTTP Version Not Supported"
        }
    }
}

/// The head of a parsed request: what the server needs to answer it and to find the next one.
///
/// Offsets are relative to the start of the bytes handed to `HTTPRequestParser.parse`.
public struct HTTPRequestHead: Sendable, Equatable {
    /// The method.
    public var method: HTTPMethod
    /// The protocol version.
    public var version: HTTPVersion
    /// Where the request-target (`/`, `/health?x=1`, ...) lies in the parsed bytes.
    public var target: Range<Int>
    /// Whether the connection may be reused after the response: HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive`; never when the body is chunked (not decoded here).
    public var keepAlive: Bool
    /// The `Content-Length` of the request body (0 when absent); the body follows the head.
    public var contentLength: Int
    /// Whether the request carries `Transfer-Encoding` (its body cannot be skipped: the connection
    /// is closed after the response).
    public var hasTransferEncoding: Bool
    /// The number of bytes of the head, from the first byte given (including any empty lines before
    /// the request line) to the end of the empty line that ends the head.
    public var length: Int

    public init(
        method: HTTPMethod, version: HTTPVersion, target: Range<Int>, keepAlive: Bool, contentLength: Int = 0,
        hasTransferEncoding: Bool = false, length: Int
    ) {
        self.method = method
        self.version = version
        self.target = target
        self.keepAlive = keepAlive
        self.contentLength = contentLength
        self.hasTransferEncoding = hasTransferEncoding
        self.length = length
    }
}

/// What one call of `HTTPRequestParser.parse` found.
public enum HTTPParseResult: Sendable, Equatable {
    /// The head is not complete yet: call again with the same bytes plus more.
    case incomplete
    /// A complete, valid request head.
    case request(HTTPRequestHead)
    /// The request is malformed (400), its head is too large (431) or its version is not 1.x (505);
    /// answer with this status and close the connection.
    case error(HTTPStatus)
}
