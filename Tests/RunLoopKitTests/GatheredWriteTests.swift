import Dispatch
import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// Writes gathered per pass: the first write of a pass goes to the socket at once, the ones after
/// it leave together when the pass ends. What left in how many sends is read from the kernel: the
/// sending socket's count of data segments (`TCP_INFO`), one per send of less than a segment here
/// (loopback, `TCP_NODELAY`). The peer is Python's `socket`.
@Suite struct GatheredWriteTests {
    /// Connects to the port given, reads to the end of stream, and prints the byte count and
    /// whether each byte is what `pattern(at:)` says.
    static let reader = """
        import socket, sys
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        # A server that never ends the stream fails the test instead of holding it.
        s.settimeout(120)
        data = bytearray()
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        ok = all(b == (i // 100) % 251 for i, b in enumerate(data))
        print(len(data), "ok" if ok else "wrong")
        """

    /// Byte `index` of the stream the tests write: 100-byte runs of one value, so that an order
    /// mix-up of any two writes shows.
    static func pattern(from start: Int, count: Int) -> [UInt8] {
        (start..<start + count).map { UInt8(($0 / 100) % 251) }
    }

    /// Data segments sent on `descriptor` so far (`tcpi_data_segs_out`, at offset 156 of Linux's
    /// `struct tcp_info` since 4.6; glibc's header stops short of it).
    static func dataSegmentsSent(_ descriptor: Int32) -> UInt32 {
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        let code = info.withUnsafeMutableBytes {
            getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length)
        }
        guard code == 0, length >= 160 else { return .max }
        return info.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 156, as: UInt32.self) }
    }

    /// A listener on a loop thread of its own, whose accept handler is `accepted`, and the Python
    /// reader connected to it: once `accepted` has run, `body` gets the loop's thread and the
    /// connection; returns what the reader printed once the connection closed.
    static func withReader(
        _ accepted: @escaping @Sendable (LoopConnection) -> Void,
        whileConnected body: @Sendable (LoopThread, LoopConnection) async throws -> Void = { _, _ in }
    ) async throws -> String {
        let thread = LoopThread(name: "gathered-writes")
        defer { thread.stop() }
        let served = Locked<LoopConnection?>(nil)
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) {
            accepted($0)
            served.withLock { [connection = $0] in $0 = connection }
        }
        defer { listener.invalidate() }
        thread.loop.add(listener, forMode: .default)
        let port = try #require(listener.localAddress.port)
        async let output = awaitFreshThread { Result { try runPython(reader, ["\(port)"]).output } }
        // A Python interpreter starts slowly while the whole suite runs beside it.
        #expect(await eventually(within: .seconds(90)) { served.withLock { $0 != nil } })
        if let connection = served.withLock({ $0 }) {
            do {
                try await body(thread, connection)
            } catch {
                // The reader waits for the end of the stream: it must see one before this returns.
                connection.abort()
                throw error
            }
        }
        return try await output.get().trimmingCharacters(in: .whitespacesAndNewlines)
    }

    struct Observed: Sendable {
        var queuedAfterFirst = -1
        var segmentsAfterFirst: UInt32 = 0
        var queuedAfterAll = -1
        var segmentsAfterAll: UInt32 = 0
    }

    @Test func theWritesOfOneCalloutAfterTheFirstLeaveInOneSendWhenThePassEnds() async throws {
        let observed = Locked<Observed?>(nil)
        let output = try await Self.withReader { accepted in
            // The accept handler is one callout: ten writes of 100 bytes.
            let descriptor = accepted.fileDescriptor
            let before = Self.dataSegmentsSent(descriptor)
            var seen = Observed()
            accepted.enqueue(Self.pattern(from: 0, count: 100))
            seen.queuedAfterFirst = accepted.outputBufferedBytes
            seen.segmentsAfterFirst = Self.dataSegmentsSent(descriptor) &- before
            for index in 1..<10 { accepted.enqueue(Self.pattern(from: index * 100, count: 100)) }
            seen.queuedAfterAll = accepted.outputBufferedBytes
            seen.segmentsAfterAll = Self.dataSegmentsSent(descriptor) &- before
            observed.withLock { $0 = seen }
        } whileConnected: { _, accepted in
            #expect(await eventually { accepted.outputBufferedBytes == 0 })
            // The lone write, then the nine gathered ones together.
            #expect(Self.dataSegmentsSent(accepted.fileDescriptor) == 2)
            accepted.close()
        }
        let seen = try #require(observed.withLock { $0 })
        // The first write left before the next one was made; the others waited for the pass's end.
        #expect(seen.queuedAfterFirst == 0)
        #expect(seen.segmentsAfterFirst == 1)
        #expect(seen.queuedAfterAll == 900)
        #expect(seen.segmentsAfterAll == 1)
        #expect(output == "1000 ok")
    }

    @Test func aLoneWriteLeavesBeforeItsCalloutReturns() async throws {
        let observed = Locked<Observed?>(nil)
        let output = try await Self.withReader { accepted in
            let before = Self.dataSegmentsSent(accepted.fileDescriptor)
            accepted.enqueue(Self.pattern(from: 0, count: 300))
            var seen = Observed()
            seen.queuedAfterFirst = accepted.outputBufferedBytes
            seen.segmentsAfterFirst = Self.dataSegmentsSent(accepted.fileDescriptor) &- before
            observed.withLock { $0 = seen }
            accepted.close()
        }
        let seen = try #require(observed.withLock { $0 })
        #expect(seen.queuedAfterFirst == 0)
        #expect(seen.segmentsAfterFirst == 1)
        #expect(output == "300 ok")
    }

    @Test func writesPostedFromAnotherThreadInOneBatchLeaveInOneFlush() async throws {
        let output = try await Self.withReader { _ in
        } whileConnected: { thread, accepted in
            let before = Self.dataSegmentsSent(accepted.fileDescriptor)
            // The loop is held in a block while this thread posts the writes, so that it finds
            // them in one batch: they are posted only once the block runs (posted while the loop
            // was taking the block, some would run in its batch and the rest in the next).
            let entered = DispatchSemaphore(value: 0)
            let gate = DispatchSemaphore(value: 0)
            thread.loop.perform {
                entered.signal()
                gate.wait()
            }
            await awaitFreshThread { entered.wait() }
            for index in 0..<20 { accepted.enqueue(Self.pattern(from: index * 100, count: 100)) }
            gate.signal()
            #expect(
                await eventually {
                    accepted.outputBufferedBytes == 0 && Self.dataSegmentsSent(accepted.fileDescriptor) &- before >= 2
                })
            #expect(Self.dataSegmentsSent(accepted.fileDescriptor) &- before == 2)
            accepted.close()
        }
        #expect(output == "2000 ok")
    }

    @Test func gatheredBytesPastTheHighWatermarkReportWritableOnceFlushed() async throws {
        let events = Recorder<LoopConnection.Event>()
        let writableInCallout = Locked<[Bool]>([])
        let output = try await Self.withReader { accepted in
            accepted.writeWatermarks = (low: 0, high: 1_000)
            accepted.onEvent { _, event in events.append(event) }
            accepted.enqueue(Self.pattern(from: 0, count: 100))
            let afterFirst = accepted.isWritable
            accepted.enqueue(Self.pattern(from: 100, count: 2_000))
            writableInCallout.withLock { $0 = [afterFirst, accepted.isWritable] }
        } whileConnected: { _, accepted in
            #expect(await eventually { events.events.contains(.writable) })
            #expect(accepted.isWritable)
            #expect(accepted.outputBufferedBytes == 0)
            accepted.close()
        }
        // Gathered, the 2,000 bytes were queued past the high watermark until the pass ended.
        #expect(writableInCallout.withLock { $0 } == [true, false])
        #expect(output == "2100 ok")
    }

    @Test func aCalloutThatWritesMegabytesKeepsOrderAndClosesAfterTheLastByte() async throws {
        let output = try await Self.withReader { accepted in
            // 4 MiB in 64 KiB writes, then close(), in one callout: past `gatherLimit` the
            // gathered bytes leave without waiting for the pass to end.
            let chunk = 64 * 1024
            for index in 0..<64 {
                accepted.enqueue(Self.pattern(from: index * chunk, count: chunk))
            }
            accepted.close()
        }
        #expect(output == "\(4 << 20) ok")
    }

    @Test(arguments: [false, true])
    func anArrayRewrittenAfterItsWriteDoesNotChangeWhatIsSent(fromAnotherThread: Bool) async throws {
        // One array, rewritten in place after each write: the queue holds the arrays whose bytes
        // the socket did not take at once by reference, and each must keep the bytes it had.
        let chunk = 64 * 1024
        let writes = 16
        @Sendable func writeAll(to connection: LoopConnection) {
            var bytes = [UInt8](repeating: 0, count: chunk)
            for index in 0..<writes {
                for offset in 0..<chunk { bytes[offset] = UInt8(((index * chunk + offset) / 100) % 251) }
                connection.enqueue(bytes)
            }
            connection.close()
        }
        let output = try await Self.withReader { accepted in
            if !fromAnotherThread { writeAll(to: accepted) } else { Thread { writeAll(to: accepted) }.start() }
        }
        #expect(output == "\(writes * chunk) ok")
    }
}
