/// Turns the bytes a connection received into responses: parses every complete request at the
/// front of the input (pipelining), skips request bodies, and appends one prepared response per
/// request to the output, in order. Event-loop independent: the caller reads and writes.
public struct HTTPRequestProcessor: Sendable {
    /// The parser, holding the scan state of a partly received head.
    public private(set) var parser: HTTPRequestParser
    /// Bytes of the current request's body still to be skipped.
    public private(set) var bodyRemaining = 0

    /// What one `process` call did.
    public struct Outcome: Sendable, Equatable {
        /// Bytes of the input dealt with; the rest is the start of a request not complete yet.
        /// When `close` is set this is the whole input: what follows the last response is ignored.
        public var consumed: Int
        /// Responses appended to the output.
        public var responses: Int
        /// Whether the connection must be closed once the output is written: the last response
        /// was an error (400, 431, 505) or said `Connection: close`.
        public var close: Bool

        public init(consumed: Int, responses: Int, close: Bool) {
            self.consumed = consumed
            self.responses = responses
            self.close = close
        }
    }

    public init(maxHeadLength: Int = HTTPRequestParser.defaultMaxHeadLength) {
        parser = HTTPRequestParser(maxHeadLength: maxHeadLength)
    }

    /// Whether the processor is between requests (no body left to skip). Together with an empty
    /// input this means the connection has no request in flight.
    public var isBetweenRequests: Bool { bodyRemaining == 0 }

    /// Processes `input`, which must start where the previous call's `consumed` ended.
    ///
    /// `allowKeepAlive: false` answers every request with `Connection: close` (a server shutting
    /// down); the first response then ends the connection.
    public mutating func process(
        _ input: UnsafeRawBufferPointer, responses table: HTTPResponseTable, into output: HTTPByteBuffer,
        allowKeepAlive: Bool = true
    ) -> Outcome {
        var output = output
        return process(input, responses: table, into: &output, allowKeepAlive: allowKeepAlive)
    }

    /// Processes `input` as above, appending the responses to any `HTTPResponseOutput` (a server's
    /// own output buffer: the responses are copied once, from the table into it).
    public mutating func process<Output: HTTPResponseOutput>(
        _ input: UnsafeRawBufferPointer, responses table: HTTPResponseTable, into output: inout Output,
        allowKeepAlive: Bool = true
    ) -> Outcome {
        let total = input.count
        var offset = 0
        var count = 0
        while offset < total {
            if bodyRemaining > 0 {
                let skipped = min(bodyRemaining, total &- offset)
                offset &+= skipped
                bodyRemaining &-= skipped
                continue
            }
            let rest = UnsafeRawBufferPointer(rebasing: input[offset...])
            switch parser.parse(rest) {
            case .incomplete:
                return Outcome(consumed: offset, responses: count, close: false)
            case .error(let status):
                output.appendResponse(table.response(.init(error: status), keepAlive: false, headOnly: false))
                return Outcome(consumed: total, responses: count &+ 1, close: true)
            case .request(let head):
                let kind = HTTPResponseTable.Kind.route(head, in: rest)
                let keepAlive = head.keepAlive && allowKeepAlive
                output.appendResponse(table.response(kind, keepAlive: keepAlive, headOnly: head.method == .head))
                count &+= 1
                if !keepAlive { return Outcome(consumed: total, responses: count, close: true) }
                offset &+= head.length
                bodyRemaining = head.contentLength
            }
        }
        return Outcome(consumed: offset, responses: count, close: false)
    }
}

/// Where `HTTPRequestProcessor` appends the responses it prepares.
public protocol HTTPResponseOutput {
    /// Appends a copy of `bytes` (a prepared response, valid only during the call).
    mutating func appendResponse(_ bytes: UnsafeRawBufferPointer)
}

extension HTTPByteBuffer: HTTPResponseOutput {
    @inlinable public func appendResponse(_ bytes: UnsafeRawBufferPointer) { append(bytes) }
}
