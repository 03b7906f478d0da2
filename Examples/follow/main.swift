// CommandLineTools.md, "Watching a file": `tail -f` on a loop, as the article shows it.
// FileWatchProgramTests runs it on a file that sh appends to, truncates, then deletes.
import Glibc
import RunLoopKit

let path = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "app.log"
let loop = Loop.current
let file = open(path, O_RDONLY | O_CLOEXEC)
/// Writes `line` to `descriptor` at once (print's buffer would hold it while the loop waits).
func say(_ line: String, to descriptor: Int32 = STDOUT_FILENO) {
    _ = write(descriptor, line + "\n", line.utf8.count + 1)
}
guard file >= 0 else {
    say("follow: cannot open \(path): \(String(cString: strerror(errno)))", to: STDERR_FILENO)
    exit(1)
}
lseek(file, 0, SEEK_END)  // only what is written from now on

/// Copies what was appended since the last call to standard output.
func copyNewBytes() {
    var status = stat()
    if fstat(file, &status) == 0 && status.st_size < lseek(file, 0, SEEK_CUR) {
        lseek(file, 0, SEEK_SET)  // truncated (log rotation by copytruncate): start over
    }
    var chunk = [UInt8](repeating: 0, count: 65536)
    while case let count = read(file, &chunk, chunk.count), count > 0 {
        _ = write(STDOUT_FILENO, chunk, count)
    }
}

let watch = try LoopFileWatch(
    path: path,
    loop.isolated { _, changes in
        if changes.contains(where: { $0.kind == .modified || $0.kind == .overflow }) {
            copyNewBytes()
        }
        var status = stat()
        if changes.contains(where: { $0.kind == .attributesChanged }) && fstat(file, &status) == 0
            && status.st_nlink == 0
        {
            close(file)  // deleted: the kernel reports it gone once its last descriptor closes
        }
        if changes.last?.kind == .watchedItemGone {
            say("follow: \(path) was deleted or moved away")
        }
    })
loop.add(watch, forMode: .default)
say("following \(path)")
loop.run()  // until the file goes: the watch then ends, and the default mode is empty
