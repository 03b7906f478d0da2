// Top-level code creating every kind of handler for a worker loop, each capturing only Sendable
// values: all run on the worker's thread, none traps.
import Glibc
import RunLoopKit
import Synchronization

final class Seen: Sendable {
    let kinds = Mutex(Set<String>())
    func saw(_ kind: String) { kinds.withLock { _ = $0.insert(kind) } }
    var count: Int { kinds.withLock { $0.count } }
}

let seen = Seen()
let worker = LoopThread(name: "worker")
let loop = worker.loop
loop.add(LoopTimer(after: .zero) { _ in seen.saw("timer") }, forMode: .default)
loop.add(LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in seen.saw("observer") }, forMode: .default)
let source = LoopSource { seen.saw("source") }
loop.add(source, forMode: .default)
source.signal()
let port = LoopPort<Int> { _ in seen.saw("port") }
loop.add(port, forMode: .default)
port.send(1)
var fds: [Int32] = [0, 0]
precondition(pipe(&fds) == 0)
let readable = try LoopDescriptorSource(fileDescriptor: fds[0], events: .readable) { source, _ in
    seen.saw("descriptor")
    source.invalidate()
}
loop.add(readable, forMode: .default)
_ = write(fds[1], "x", 1)
let link = FrameLink(framesPerSecond: 120) { link in
    seen.saw("frame")
    link.invalidate()
}
link.add(to: loop, forMode: .common)
let signals = LoopSignalSource(signal: SIGUSR2) { _ in seen.saw("signal") }
loop.add(signals, forMode: .default)
loop.perform { raise(SIGUSR2) }
let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
    seen.saw("accept")
    connection.onRead { _, buffer in
        seen.saw("read")
        buffer.consume(buffer.count)
    }
    connection.onEvent { _, event in if case .closed = event { seen.saw("event") } }
}
loop.add(listener, forMode: .default)
LoopConnection.connect(to: listener.localAddress, on: loop) { result in
    seen.saw("connect")
    if case .success(let connection) = result {
        connection.enqueue([1])
        connection.close()
    }
}
let datagrams = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
datagrams.onReceive { socket, _, _ in
    seen.saw("datagram")
    socket.invalidate()
}
loop.add(datagrams, forMode: .default)
datagrams.send([1], to: datagrams.localAddress)
let child = try LoopProcess(executable: "/bin/true")
child.onExit { _, _ in seen.saw("exit") }
loop.add(child, forMode: .default)
loop.schedule(after: .milliseconds(1)) { seen.saw("schedule") }
LoopWorkPool.shared.run({ 1 }, completingOn: loop) { _ in seen.saw("completion") }

let deadline = ContinuousClock.now + .seconds(20)
while seen.count < 15 && ContinuousClock.now < deadline { usleep(1000) }
precondition(seen.count == 15, "saw only \(seen.kinds.withLock { $0.sorted() })")
worker.stop()
