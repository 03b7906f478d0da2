// A TLS listener's accept handler appends to a list of connections that the creating code also
// reads.
// expect-error: risks causing data races
import RunLoopKit

final class Clients { var all: [LoopConnection] = [] }

func serve(on worker: LoopThread, _ tls: TLSConfiguration) throws {
    let clients = Clients()
    let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0), tls: tls) { connection in
        clients.all.append(connection)
    }
    worker.loop.add(listener, forMode: .default)
    print(clients.all.count)
}
try serve(on: LoopThread(name: "worker"), TLSConfiguration.server(certificateChain: "cert.pem", privateKey: "key.pem"))
