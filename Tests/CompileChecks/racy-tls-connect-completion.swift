// A TLS connect completion on a worker loop stores the connection where the caller reads it.
// expect-error: risks causing data races
import RunLoopKit

final class Slot { var connection: LoopConnection? }

func dial(_ address: SocketAddress, on worker: LoopThread) {
    let slot = Slot()
    LoopConnection.connect(to: address, on: worker.loop, tls: .client(serverName: "localhost")) { result in
        slot.connection = try? result.get()
    }
    print(slot.connection == nil)
}
