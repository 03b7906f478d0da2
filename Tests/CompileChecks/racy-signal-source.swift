// A signal source's handler on a worker loop sets a top-level flag the main thread polls.
// expect-error: main actor-isolated var 'stopping' can not be mutated from a nonisolated context
import Glibc
import RunLoopKit

var stopping = false
let worker = LoopThread(name: "worker")
worker.loop.add(LoopSignalSource(signal: SIGUSR1) { _ in stopping = true }, forMode: .default)
while !stopping {}
