// A shed handler counts into a variable that the creating code also reads.
// expect-error: risks causing data races
import RunLoopKit

final class Tally { var shed = 0 }

func serve(on worker: LoopThread) throws {
    let tally = Tally()
    let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
    listener.onShed { _, _ in tally.shed += 1 }
    worker.loop.add(listener, forMode: .default)
    print(tally.shed)
}
try serve(on: LoopThread(name: "worker"))
