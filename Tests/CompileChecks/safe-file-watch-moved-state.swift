// A file watch's handler owns the state moved into it, and reports through Sendable values only:
// it compiles, and runs on a worker loop.
import Glibc
import RunLoopKit
import Synchronization

let seen = Atomic<Int>(0)
let directory = "/tmp/safe-file-watch-\(getpid())"
mkdir(directory, 0o700)
let worker = LoopThread(name: "worker")
var names: [String] = []  // moved into the handler below, touched nowhere else
let watch = try LoopFileWatch(path: directory) { [names] _, changes in
    var mine = names
    for change in changes { mine.append(change.name ?? "") }
    seen.add(mine.count, ordering: .relaxed)
}
worker.loop.add(watch, forMode: .default)
close(open(directory + "/file", O_CREAT | O_WRONLY, 0o600))
while seen.load(ordering: .relaxed) == 0 { usleep(1000) }
watch.invalidate()
unlink(directory + "/file")
rmdir(directory)
worker.stop()
