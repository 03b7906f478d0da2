// InsideAnotherLoop.md: a program whose own loop waits in poll(2) and drives a RunLoopKit loop,
// run by EmbeddingTests as a child process on its main thread.
import Dispatch
import Glibc
import RunLoopKit

let loop = Loop.current
for n in 1...3 {
    loop.add(LoopTimer(after: .milliseconds(200 * n)) { _ in print("tick \(n)") }, forMode: .default)
}
DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) {
    loop.perform { print("posted from another thread") }
}

// The program's own loop: its descriptors, and the run loop's.
var descriptors = [pollfd(fd: loop.backendDescriptor, events: Int16(POLLIN), revents: 0)]
while let next = loop.nextTimerFireDate(forMode: .default) {
    let wait = max(.zero, next - .now)
    _ = poll(&descriptors, 1, Int32(wait / .milliseconds(1)) + 1)
    // ... serve the program's own descriptors here
    loop.run(mode: .default, for: .zero)
}
print("done")
