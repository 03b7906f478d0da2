import HTTPCore
import RunLoopKit

/// One client connection: its `LoopConnection`, the HTTP parser's state between reads, and the
/// responses of a batch of requests gathered in one array before they are written.
///
/// Used only on its worker's loop thread, where the connection's handlers run.
final class Session {
    let connection: LoopConnection
    private let worker: Worker
    private var processor = HTTPRequestProcessor()
    private var output = ResponseBuffer()
    /// The start of a request not complete yet waits in the input.
    private var hasPartialRequest = false

    init(connection: LoopConnection, worker: Worker) {
        self.connection = connection
        self.worker = worker
    }

    /// Sets the handlers. They hold the session until the connection closes, which lets them go.
    func start() {
        connection.idleTimeout = worker.idleTimeout
        // Made in the accept handler, on the loop's thread: the handlers may hold the session.
        connection.onRead(worker.loop.isolated { [self] _, input in received(&input) })
        connection.onEvent(
            worker.loop.isolated { [self] _, event in
                if case .closed = event { worker.sessionClosed(self) }
            })
    }

    /// The server is shutting down: the connection is kept in `mode`, which the draining worker
    /// runs, and closes once nothing is under way (a request partly received or its body being
    /// skipped gets its response first, with `Connection: close`; queued output is flushed).
    func drain(keepingIn mode: Loop.Mode) {
        worker.loop.add(connection, forMode: mode)
        let processor = self.processor
        if !hasPartialRequest && processor.isBetweenRequests { connection.close() }
    }

    private func received(_ input: inout LoopBuffer) {
        worker.tick()
        let responses = worker.responses
        let keepAlive = !worker.isDraining
        // The parser's state and the response buffer are worked on as locals and stored back
        // after. The runtime checks every access to a class's stored `var` during which other
        // code runs (exclusivity); when no access to a property spans a call, as here, the
        // optimizer drops the checks altogether (docs/performance-notes.md#instructions-per-request).
        var processor = self.processor
        var output = self.output
        self.output = ResponseBuffer()
        // The parser works in place on the bytes received: one contiguous region, which costs a
        // copy only when a request spans two of the buffer's blocks.
        let outcome = input.withContiguousBytes(upTo: input.count) { bytes in
            processor.process(bytes, responses: responses, into: &output, allowKeepAlive: keepAlive)
        }
        input.consume(outcome.close ? input.count : outcome.consumed)
        if !output.bytes.isEmpty {
            // Sent at once when nothing is queued (the usual case); only what the socket does not
            // take is copied to the connection's output.
            connection.enqueue(output.bytes)
            output.bytes.removeAll(keepingCapacity: true)
        }
        // Back, emptied, to be filled again by the next batch.
        self.output = output
        self.processor = processor
        let partial = !input.isEmpty
        hasPartialRequest = partial
        if outcome.close { finish() }
    }

    /// After the last response: `close()` is graceful. The response goes out, then a FIN, and
    /// what the client still sends is dropped until its end of stream (2 seconds at most), so
    /// that unread input cannot turn the close into a reset, which could destroy the response
    /// before the client has read it.
    private func finish() {
        hasPartialRequest = false
        connection.close()
    }
}

/// The responses of one batch of requests, written in one `write`. An array, not a `LoopBuffer`:
/// a batch that the socket takes at once then costs no buffer block (an allocation, a copy and a
/// free per request).
struct ResponseBuffer: HTTPResponseOutput {
    var bytes: [UInt8] = []

    mutating func appendResponse(_ response: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: response)
    }
}
