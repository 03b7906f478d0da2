// Two datagram sockets' receive handlers, on two loops, total into one non-Sendable counter.
// expect-error: risks causing data races
import RunLoopKit

final class Counter { var datagrams = 0 }

func count(_ first: LoopDatagramSocket, _ second: LoopDatagramSocket) {
    let counter = Counter()
    first.onReceive { _, bytes, _ in counter.datagrams += bytes.isEmpty ? 0 : 1 }
    second.onReceive { _, bytes, _ in counter.datagrams += bytes.isEmpty ? 0 : 1 }
}
