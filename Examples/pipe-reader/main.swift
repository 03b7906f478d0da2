// SourcesAndPorts.md's descriptor source on a pipe, as a program's main.swift: run on the main
// thread by MainLoopProgramTests.
import Glibc
import RunLoopKit

let loop = Loop.current
var fds: [Int32] = [0, 0]
_ = fds.withUnsafeMutableBufferPointer { pipe($0.baseAddress!) }
let reader = try LoopDescriptorSource(
    fileDescriptor: fds[0], events: .readable
) { source, ready in
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = read(source.fileDescriptor, &buffer, buffer.count)
    if count <= 0 {  // the writer closed
        source.invalidate()  // off epoll now...
        // ...so the descriptor may be closed right after:
        close(source.fileDescriptor)
        return
    }
    print("read \(count) bytes")
}
loop.add(reader, forMode: .default)
_ = write(fds[1], "ping", 4)
close(fds[1])
loop.run(mode: .default, for: .seconds(5))
// prints "read 4 bytes"; then the end of file invalidates the source
// and the run finishes
