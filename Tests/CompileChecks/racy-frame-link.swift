// A frame link's handler and its creator both append to one non-Sendable recorder.
// expect-error: risks causing data races
import RunLoopKit

final class Frames { var times: [ContinuousClock.Instant] = [] }

func start(on worker: LoopThread) {
    let frames = Frames()
    let link = FrameLink(framesPerSecond: 60) { link in frames.times.append(link.timestamp) }
    link.add(to: worker.loop, forMode: .common)
    frames.times.removeAll()
}
start(on: LoopThread(name: "worker"))
