// SourcesAndPorts.md, "Reading standard input": a line reader on standard input, as the article
// shows it. StandardInputProgramTests runs it with its input from a pipe, from /dev/null, from a
// file and from a terminal (tmux).
import Glibc
import RunLoopKit

let loop = Loop.current
var pending: [UInt8] = []  // the start of a line whose newline has not come yet
var lines = 0
do {
    let input = try LoopDescriptorSource(
        fileDescriptor: STDIN_FILENO, events: .readable,
        loop.isolated { source, _ in
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(source.fileDescriptor, &chunk, chunk.count)
            if count > 0 { pending += chunk[..<count] }
            if count <= 0 && !pending.isEmpty { pending.append(0x0A) }  // a last line with no newline
            while let newline = pending.firstIndex(of: 0x0A) {
                lines += 1
                print("\(lines): \(String(decoding: pending[..<newline], as: UTF8.self))")
                pending.removeSubrange(...newline)
            }
            if count <= 0 {  // the end of the input (Ctrl-D on a terminal), or a read error
                source.invalidate()
                loop.stop()
            }
        })
    loop.add(input, forMode: .default)
} catch {
    let message = "cannot read standard input: \(error.message)\n"
    _ = write(STDERR_FILENO, message, message.utf8.count)  // to standard error
    exit(1)
}
loop.run()  // until the end of the input
print("\(lines) lines")
