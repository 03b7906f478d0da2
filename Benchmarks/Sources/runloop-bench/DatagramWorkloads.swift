import CRawLibevent
import CRawLibuv
import CRawPeer
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

// The datagram workloads, over loopback UDP: echo round trips and a flood with a window.
// RunLoopKit's side is here; raw libevent's in Sources/CRawLibevent/raw_libevent_udp.c, libuv's
// in Sources/CRawLibuv/raw_libuv_udp.c. Each side of a run is a socket on a loop thread of its
// own; the protocol is the same for all: echo with one datagram in flight; a flood keeping at most
// `window` datagrams unacknowledged, the receiver acknowledging every 64th with its count.

/// What the datagram workloads do, at a size derived from the socket workloads' (no size field of
/// their own): twice the TCP echo's round trips, and 25 times as many datagrams in the flood.
struct DatagramSizes: Sendable {
    var echoRoundTrips: Int
    var floodDatagrams: Int
    var message = 64
    var window = 512

    init(_ sockets: SocketSizes) {
        echoRoundTrips = sockets.echoRoundTrips * 2
        floodDatagrams = sockets.echoRoundTrips * 25
    }
}

/// One implementation of the datagram workloads.
protocol DatagramContender {
    /// Seconds for `roundTrips` sequential round trips of `message`-byte datagrams.
    static func udpEcho(roundTrips: Int, message: Int, timeout: Double) -> Outcome<Double>
    /// Seconds from the first of `datagrams` datagrams sent to the last received.
    static func udpFlood(datagrams: Int, message: Int, window: Int, timeout: Double) -> Outcome<Double>
}

extension Implementation {
    /// Who does the datagram workloads; the reason why not for the others.
    var datagrams: Result<any DatagramContender.Type, BenchError> {
        switch self {
        case .runLoopKit: .success(RunLoopKitDatagrams.self)
        case .libevent: .success(LibeventContender.self)
        case .libuv: .success(LibuvContender.self)
        case .glib, .foundation: .failure(BenchError(reason: "not measured (see the note on the first row)"))
        }
    }
}

extension MetricID {
    static let udpEcho = "udp.echo"
    static let udpFlood = "udp.flood"
}

extension Workloads {
    static let datagramNotes: [Implementation: String] = [
        .foundation: "Foundation on Linux has no datagram sockets on its run loop: not measured",
        .glib: "not measured (the comparison asked for is libuv's uv_udp_t and raw libevent)",
    ]

    static let datagrams = Workload(
        number: 17, name: "datagrams", title: "UDP over loopback: echo round trips and datagrams per second",
        metrics: [
            Metric(
                id: MetricID.udpEcho, label: "UDP echo round trips", unit: "round trips/s",
                direction: .higherIsBetter, notes: datagramNotes),
            Metric(
                id: MetricID.udpFlood, label: "datagrams per second", unit: "datagrams/s",
                direction: .higherIsBetter),
        ], curves: [],
        how: [
            .runLoopKit:
                "two `LoopDatagramSocket`s on two `LoopThread`s; echo: the server's `onReceive` sends each datagram back (`send(_:to:)`), the client's sends the next; flood: the sender's `onReceive` (the acknowledgements) sends while fewer than 512 are unacknowledged, the receiver's counts and acknowledges every 64th",
            .libevent:
                "a non-blocking UDP socket with a persistent `EV_READ` event per side, each on its own `event_base` thread; the callback reads with `recvfrom` until `EAGAIN` and answers with `sendto`",
            .libuv:
                "a `uv_udp_t` per side (`UV_UDP_RECVMMSG`: up to 20 datagrams per `recvmmsg` into one static buffer), each on its own loop thread; `uv_udp_try_send`, with `uv_udp_send` of a copy when the kernel's buffer is full",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let sizes = DatagramSizes(size.sockets)
            let contender = implementation.datagrams
            sample.record(
                MetricID.udpEcho,
                contender.flatMap {
                    $0.udpEcho(roundTrips: sizes.echoRoundTrips, message: sizes.message, timeout: size.timeout)
                }.map { Double(sizes.echoRoundTrips) / $0 })
            sample.record(
                MetricID.udpFlood,
                contender.flatMap {
                    $0.udpFlood(
                        datagrams: sizes.floodDatagrams, message: sizes.message, window: sizes.window,
                        timeout: size.timeout)
                }.map { Double(sizes.floodDatagrams) / $0 })
            return sample
        })
}

// MARK: The C peers

extension LibeventContender: DatagramContender {
    static func udpEcho(roundTrips: Int, message: Int, timeout: Double) -> Outcome<Double> {
        peerOutcome(raw_libevent_udp_echo(Int32(roundTrips), Int32(message), timeout), of: roundTrips)
    }

    static func udpFlood(datagrams: Int, message: Int, window: Int, timeout: Double) -> Outcome<Double> {
        peerOutcome(
            raw_libevent_udp_flood(Int64(datagrams), Int32(message), Int32(window), timeout), of: datagrams)
    }
}

extension LibuvContender: DatagramContender {
    static func udpEcho(roundTrips: Int, message: Int, timeout: Double) -> Outcome<Double> {
        peerOutcome(raw_libuv_udp_echo(Int32(roundTrips), Int32(message), timeout), of: roundTrips)
    }

    static func udpFlood(datagrams: Int, message: Int, window: Int, timeout: Double) -> Outcome<Double> {
        peerOutcome(raw_libuv_udp_flood(Int64(datagrams), Int32(message), Int32(window), timeout), of: datagrams)
    }
}

/// The seconds of a C run, or why it failed and how far it got.
func peerOutcome(_ result: raw_sock_result, of target: Int) -> Outcome<Double> {
    guard result.ok != 0, result.seconds > 0 else {
        let step = result.failure.map { String(cString: $0) } ?? "no figure measured"
        let error = result.error != 0 ? " (\(String(cString: strerror(result.error))))" : ""
        return .failure(BenchError(reason: "\(step)\(error); \(result.count) of \(target) done"))
    }
    return .success(result.seconds)
}

// MARK: RunLoopKit

/// The datagram workloads on RunLoopKit, through the public API only.
enum RunLoopKitDatagrams: DatagramContender {
    /// One run's bookkeeping: `count` is touched on the counting side's loop only.
    final class Run: @unchecked Sendable {
        let target: Int
        let reached = DispatchSemaphore(value: 0)
        var start = 0.0
        var end = 0.0
        var count = 0
        var sent = 0
        var acknowledged = 0

        init(target: Int) { self.target = target }
    }

    static func udpEcho(roundTrips: Int, message: Int, timeout: Double) -> Outcome<Double> {
        let run = Run(target: roundTrips)
        let bytes = [UInt8](repeating: 0x6D, count: message)
        return drive(run, timeout: timeout) { server, client in
            server.onReceive { socket, bytes, sender in socket.send(bytes, to: sender) }
            client.onReceive { socket, _, sender in
                run.count += 1
                if run.count == run.target {
                    run.end = monotonicSeconds()
                    run.reached.signal()
                } else {
                    socket.send(bytes, to: sender)
                }
            }
            return { client.send(bytes, to: server.localAddress) }
        }
    }

    static func udpFlood(datagrams: Int, message: Int, window: Int, timeout: Double) -> Outcome<Double> {
        let run = Run(target: datagrams)
        let bytes = [UInt8](repeating: 0x6D, count: message)
        return drive(run, timeout: timeout) { receiver, sender in
            let target = receiver.localAddress
            receiver.onReceive { socket, _, from in
                run.count += 1
                if run.count % 64 == 0 || run.count == run.target {
                    withUnsafeBytes(of: run.count) { socket.send($0, to: from) }
                }
                if run.count == run.target {
                    run.end = monotonicSeconds()
                    run.reached.signal()
                }
            }
            let fill: @Sendable () -> Void = {
                while run.sent < run.target && run.sent - run.acknowledged < window {
                    sender.send(bytes, to: target)
                    run.sent += 1
                }
            }
            sender.onReceive { _, acknowledgement, _ in
                guard acknowledgement.count == MemoryLayout<Int>.size else { return }
                run.acknowledged = max(run.acknowledged, acknowledgement.withUnsafeBytes { $0.load(as: Int.self) })
                fill()
            }
            return fill
        }
    }

    /// Binds two sockets on two loop threads, lets `setUp` set their handlers (server or
    /// receiver first), then starts the clock and calls what `setUp` returned on the client's loop.
    private static func drive(
        _ run: Run, timeout: Double,
        _ setUp: (LoopDatagramSocket, LoopDatagramSocket) -> @Sendable () -> Void
    ) -> Outcome<Double> {
        let serverThread = LoopThread(name: "bench-udp-server")
        let clientThread = LoopThread(name: "bench-udp-client")
        defer { RunLoopKitContender.stop([clientThread, serverThread]) }
        let server: LoopDatagramSocket
        let client: LoopDatagramSocket
        do {
            server = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
            client = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
            try server.setReceiveBufferSize(4 << 20)
            try client.setReceiveBufferSize(4 << 20)
        } catch {
            return .failure(BenchError(reason: "cannot bind: \(error)"))
        }
        let start = setUp(server, client)
        serverThread.loop.add(server, forMode: .common)
        clientThread.loop.add(client, forMode: .common)
        clientThread.loop.perform {
            run.start = monotonicSeconds()
            start()
        }
        let reached = run.reached.wait(timeout: .now() + timeout) == .success
        server.invalidate()
        client.invalidate()
        guard reached else { return .failure(BenchError(reason: "timed out; \(run.count) of \(run.target) done")) }
        return .success(run.end - run.start)
    }
}
