import CRawPeer
import Dispatch
import Glibc

// The server I/O workloads, over loopback TCP: bulk throughput, request/response round trips and
// memory per idle connection. RunLoopKit's side is in RunLoopKitSockets.swift, raw libevent's in
// Sources/CRawLibevent/raw_libevent_sockets.c, libuv's in Sources/CRawLibuv/raw_libuv_sockets.c,
// GLib's in Sources/CRawGLib/raw_glib_sockets.c (with the driver shared by the C peers in
// Sources/CRawPeer/raw_peer_sockets.c).

/// What each socket workload does.
struct SocketSizes: Sendable {
    /// Bulk: bytes sent over one connection, in `bulkChunk`-byte writes.
    var bulkBytes: Int
    var bulkChunk = 64 * 1024
    /// Echo: round trips on one connection, and per connection on `echoConnections` connections.
    var echoRoundTrips: Int
    var echoConnections = 100
    var echoRoundTripsEach: Int
    var echoMessage = 64
    /// Idle connections opened for the memory figure.
    var idleConnections: Int

    // Full: 9,000 connections (18,000 descriptors in one process: under this machine's 20,000 limit).
    static let full = SocketSizes(
        bulkBytes: 1 << 30, echoRoundTrips: 20_000, echoRoundTripsEach: 1_000, idleConnections: 9_000)
    static let quick = SocketSizes(
        bulkBytes: 256 << 20, echoRoundTrips: 3_000, echoRoundTripsEach: 200, idleConnections: 2_000)
    static let tiny = SocketSizes(bulkBytes: 4 << 20, echoRoundTrips: 100, echoRoundTripsEach: 5, idleConnections: 50)
}

/// One implementation of the socket workloads: server and clients on two loop threads of its own.
protocol SocketContender {
    /// Seconds to send `bytes` in `chunk`-byte writes that respect the writer's backpressure.
    static func bulk(bytes: Int, chunk: Int, timeout: Double) -> Outcome<Double>
    /// `roundTrips` sequential round trips of `message` bytes on each of `connections`
    /// connections: the seconds from all connected to all done, and each round trip in µs when
    /// there is one connection.
    static func echo(connections: Int, roundTrips: Int, message: Int, timeout: Double) -> Outcome<
        (seconds: Double, times: [Double])
    >
    /// Resident bytes per idle open connection, its client and its server side together.
    static func memoryPerConnection(count: Int, timeout: Double) -> Outcome<Double>
}

extension Implementation {
    /// Who does the socket workloads; the reason why not for the others.
    var sockets: Result<any SocketContender.Type, BenchError> {
        switch self {
        case .runLoopKit: .success(RunLoopKitSockets.self)
        case .libevent: .success(LibeventContender.self)
        case .libuv: .success(LibuvContender.self)
        case .glib: .success(GLibContender.self)
        case .foundation: .failure(BenchError(reason: "not measured (see the note on the first row)"))
        }
    }
}

extension MetricID {
    static let tcpBulk = "tcp.bulk"
    static let tcpEcho1 = "tcp.echo.1"
    static let tcpEcho1P50 = "tcp.echo.1.p50"
    static let tcpEcho1P99 = "tcp.echo.1.p99"
    static let tcpEcho100 = "tcp.echo.100"
    static let tcpIdleMemory = "tcp.idle.memory"
}

extension Workloads {
    /// Why a peer has no figure in the socket rows, printed under the table.
    static let socketNotes: [Implementation: String] = [
        .foundation: "Foundation on Linux has no sockets on its run loop (only CFSocket's helper thread): not measured"
    ]

    static let bulk = Workload(
        number: 11, name: "bulk", title: "TCP bulk throughput over loopback",
        metrics: [
            Metric(
                id: MetricID.tcpBulk, label: "TCP bulk, 64 KiB writes", unit: "GB/s", direction: .higherIsBetter,
                notes: socketNotes)
        ], curves: [],
        how: [
            .runLoopKit:
                "a `LoopConnection` writes 64 KiB chunks while `isWritable`, and again on `.writable`; the accepted connection, on another `LoopThread`, consumes each read in `onRead`",
            .libevent:
                "a `bufferevent` client refills its output to 256 KiB from its write callback (low watermark 64 KiB); the server's `bufferevent`, from an `evconnlistener` on another loop, drains its input",
            .libuv:
                "a `uv_tcp_t` client writes 64 KiB chunks (`uv_try_write`, the rest by `uv_write`) until its `write_queue_size` is 256 KiB, and again from the write callback once it is down to 64 KiB; the server, accepting in its `uv_listen` callback on another loop, reads with `uv_read_start` into one 64 KiB buffer from its alloc callback",
            .glib:
                "a non-blocking socket's `GUnixFDSource` (on the loop's `GMainContext`): the client queues 64 KiB chunks (one static `GBytes`) in a `GQueue` up to 256 KiB and sends them with `sendmsg`, again from a `G_IO_OUT` source once 64 KiB or less is left; the server, accepting on another loop, reads 64 KiB at a time",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let sockets = size.sockets
            sample.record(
                MetricID.tcpBulk,
                implementation.sockets.flatMap { contender in
                    contender.bulk(bytes: sockets.bulkBytes, chunk: sockets.bulkChunk, timeout: size.timeout)
                }.map { Double(sockets.bulkBytes) / $0 / 1e9 })
            return sample
        })

    static let echo = Workload(
        number: 12, name: "echo", title: "TCP request/response round trips over loopback",
        metrics: [
            Metric(
                id: MetricID.tcpEcho1, label: "echo, 1 connection", unit: "round trips/s", direction: .higherIsBetter,
                notes: socketNotes),
            Metric(id: MetricID.tcpEcho1P50, label: "echo p50, 1 connection", unit: "µs", direction: .lowerIsBetter),
            Metric(id: MetricID.tcpEcho1P99, label: "echo p99, 1 connection", unit: "µs", direction: .lowerIsBetter),
            Metric(
                id: MetricID.tcpEcho100, label: "echo, 100 connections", unit: "round trips/s",
                direction: .higherIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "64-byte messages, one in flight per client `LoopConnection`; the server's `onRead` writes the buffer back (`write(&buffer)`); clients and server on two `LoopThread`s",
            .libevent:
                "the same with `bufferevent`s; the server moves its input to its output (`bufferevent_write_buffer`)",
            .libuv:
                "the same with `uv_tcp_t` streams and `uv_read_start`; the server writes each read back with `uv_try_write` (a copy of the rest by `uv_write`)",
            .glib:
                "the same with a `GUnixFDSource` per socket and `recv`; the server sends each read straight back (`send`), queueing a `GBytes` copy of what the kernel does not take",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let sockets = size.sockets
            let contender = implementation.sockets
            let one = contender.flatMap {
                $0.echo(
                    connections: 1, roundTrips: sockets.echoRoundTrips, message: sockets.echoMessage,
                    timeout: size.timeout)
            }
            switch one {
            case .success(let run):
                let summary = Stats.summary(run.times)
                sample.values[MetricID.tcpEcho1] = Double(sockets.echoRoundTrips) / run.seconds
                sample.values[MetricID.tcpEcho1P50] = summary.p50
                sample.values[MetricID.tcpEcho1P99] = summary.p99
            case .failure(let error):
                sample.markMissing([MetricID.tcpEcho1, MetricID.tcpEcho1P50, MetricID.tcpEcho1P99], error)
            }
            let total = sockets.echoConnections * sockets.echoRoundTripsEach
            sample.record(
                MetricID.tcpEcho100,
                contender.flatMap {
                    $0.echo(
                        connections: sockets.echoConnections, roundTrips: sockets.echoRoundTripsEach,
                        message: sockets.echoMessage, timeout: size.timeout)
                }.map { Double(total) / $0.seconds })
            return sample
        })

    static let connections = Workload(
        number: 13, name: "connections", title: "Memory per idle TCP connection",
        metrics: [
            Metric(
                id: MetricID.tcpIdleMemory, label: "memory per idle connection", unit: "bytes",
                direction: .lowerIsBetter, notes: socketNotes)
        ], curves: [],
        how: [
            .runLoopKit:
                "RSS delta (in a fresh child process) over N client `LoopConnection`s and the N the server accepted, all open and idle, each with its `onRead`",
            .libevent:
                "RSS delta over N client `bufferevent`s and the N accepted by an `evconnlistener`, all open and idle, reading enabled",
            .libuv:
                "RSS delta over N client `uv_tcp_t`s (`uv_tcp_connect`) and the N accepted in a `uv_listen` callback, all open and idle, each in `uv_read_start` (one read buffer per loop, from the alloc callback)",
            .glib:
                "RSS delta over N connected client sockets and the N accepted, all open and idle, each watched for reading by a `GUnixFDSource` (one read buffer per loop)",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            sample.record(
                MetricID.tcpIdleMemory,
                implementation.sockets.flatMap { _ in
                    MemoryProbe.measure(
                        implementation, .connection, count: size.sockets.idleConnections, timeout: size.timeout)
                })
            return sample
        })

    /// In the probe's process: bytes per idle connection.
    static func memoryPerConnection(_ implementation: Implementation, count: Int, timeout: Double) -> Outcome<Double> {
        implementation.sockets.flatMap { $0.memoryPerConnection(count: count, timeout: timeout) }
    }
}

// MARK: The C peers

extension LibeventContender: SocketContender {}
extension LibuvContender: SocketContender {}
extension GLibContender: SocketContender {}

extension CPeerContender {
    /// Why a socket run failed, from the step the driver names and how far the run got.
    private static func failure(of result: raw_sock_result, progress: String) -> BenchError {
        let step = result.failure.map { String(cString: $0) } ?? "no figure measured"
        let error = result.error != 0 ? " (\(String(cString: strerror(result.error))))" : ""
        return BenchError(reason: "\(step)\(error); \(progress) \(result.count)")
    }

    static func bulk(bytes: Int, chunk: Int, timeout: Double) -> Outcome<Double> {
        let result = raw_peer_bulk(peer, Int64(bytes), Int32(chunk), timeout)
        guard result.ok != 0, result.seconds > 0 else {
            return .failure(failure(of: result, progress: "bytes received of \(bytes):"))
        }
        return .success(result.seconds)
    }

    static func echo(connections: Int, roundTrips: Int, message: Int, timeout: Double) -> Outcome<
        (seconds: Double, times: [Double])
    > {
        var times = [Double](repeating: .nan, count: connections == 1 ? roundTrips : 0)
        let result = times.withUnsafeMutableBufferPointer { buffer in
            raw_peer_echo(peer, Int32(connections), Int32(roundTrips), Int32(message), buffer.baseAddress, timeout)
        }
        guard result.ok != 0, result.seconds > 0 else {
            return .failure(failure(of: result, progress: "round trips completed of \(connections * roundTrips):"))
        }
        return .success((result.seconds, times))
    }

    static func memoryPerConnection(count: Int, timeout: Double) -> Outcome<Double> {
        let result = raw_peer_idle_connections(peer, Int32(count), timeout)
        guard result.ok != 0 else {
            return .failure(failure(of: result, progress: "connections of \(count) opened:"))
        }
        return .success(result.bytes_per_connection)
    }
}
