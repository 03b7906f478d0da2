// A descriptor source's handler appends to an array its creator reads.
// expect-error: risks causing data races
import Glibc
import RunLoopKit

final class Inbox { var bytes: [UInt8] = [] }

func watch(_ descriptor: Int32, on worker: LoopThread) throws {
    let inbox = Inbox()
    let source = try LoopDescriptorSource(fileDescriptor: descriptor, events: .readable) { source, _ in
        var byte: UInt8 = 0
        if read(source.fileDescriptor, &byte, 1) == 1 { inbox.bytes.append(byte) }
    }
    worker.loop.add(source, forMode: .default)
    print(inbox.bytes.count)
}
var fds: [Int32] = [0, 0]
pipe(&fds)
try watch(fds[0], on: LoopThread(name: "worker"))
