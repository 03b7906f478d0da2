// WritingAServer.md, "Listening sockets from systemd": a server that takes the sockets systemd
// (or `systemd-socket-activate`) passed it, and ends on SIGTERM; run by ServerProgramTests under
// `systemd-socket-activate`.
import Glibc
import RunLoopKit

let server = LoopThread(name: "server")
let listeners = try LoopListener.systemdListeners { connection in
    connection.enqueue(Array("hello from a socket-activated server\n".utf8))
    connection.close()
}
for listener in listeners { server.loop.add(listener, forMode: .common) }

// systemd stops a service with SIGTERM: stop listening, then end.
let terminate = LoopSignalSource(signal: SIGTERM) { _ in
    for listener in listeners { listener.invalidate() }
    Loop.main.stop()
}
Loop.main.add(terminate, forMode: .default)
print("\(listeners.count) listener(s); LISTEN_FDS \(getenv("LISTEN_FDS") == nil ? "removed" : "kept")")
fflush(nil)
Loop.main.run()
print("stopped")
