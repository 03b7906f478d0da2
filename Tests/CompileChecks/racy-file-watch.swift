// A file watch's handler on a worker loop appends to an array its creator reads.
// expect-error: risks causing data races
import RunLoopKit

final class Log { var names: [String] = [] }

func follow(_ path: String, on worker: LoopThread) throws {
    let log = Log()
    let watch = try LoopFileWatch(path: path) { _, changes in
        for change in changes { log.names.append(change.name ?? path) }
    }
    worker.loop.add(watch, forMode: .default)
    print(log.names.count)
}
try follow("/tmp", on: LoopThread(name: "worker"))
