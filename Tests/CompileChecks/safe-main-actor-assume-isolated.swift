// Handlers on the main loop reach main-actor state through MainActor.assumeIsolated.
import RunLoopKit

@MainActor final class Score {
    var fired = 0
}

let score = Score()
let loop = Loop.main
let timer = LoopTimer(after: .milliseconds(1), repeating: .milliseconds(1)) { timer in
    MainActor.assumeIsolated {
        score.fired += 1
        if score.fired == 3 { timer.invalidate() }
    }
}
loop.add(timer, forMode: .default)
while timer.isValid { loop.run(mode: .default, for: .seconds(1)) }
precondition(score.fired == 3)
