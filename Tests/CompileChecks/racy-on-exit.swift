// A process's exit handler writes a status the caller reads without waiting for it.
// expect-error: risks causing data races
import RunLoopKit

final class Outcome { var status: LoopProcess.Status? }

func launch(on worker: LoopThread) throws {
    let outcome = Outcome()
    let child = try LoopProcess(executable: "/bin/true")
    child.onExit { _, status in outcome.status = status }
    worker.loop.add(child, forMode: .default)
    print(outcome.status == nil)
}
try launch(on: LoopThread(name: "worker"))
