// A custom source's handler and its creator both use one non-Sendable object.
// expect-error: risks causing data races
import RunLoopKit

final class Log { var lines: [String] = [] }

func start(on worker: LoopThread) {
    let log = Log()
    let source = LoopSource { log.lines.append("performed") }
    worker.loop.add(source, forMode: .default)
    source.signal()
    log.lines.append("signalled")
}
start(on: LoopThread(name: "worker"))
