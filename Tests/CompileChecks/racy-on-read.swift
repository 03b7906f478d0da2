// Two connections' read handlers, on two loops, total into one non-Sendable counter.
// expect-error: risks causing data races
import RunLoopKit

final class Counter { var bytes = 0 }

func count(_ first: LoopConnection, _ second: LoopConnection) {
    let counter = Counter()
    first.onRead { _, buffer in
        counter.bytes += buffer.count
        buffer.consume(buffer.count)
    }
    second.onRead { _, buffer in
        counter.bytes += buffer.count
        buffer.consume(buffer.count)
    }
}
