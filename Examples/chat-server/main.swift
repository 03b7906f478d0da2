// WritingAServer.md's chat room and its shutdown, as a program's main.swift: run on the main
// thread by ServerProgramTests, whose clients talk to it and then end it with SIGTERM.
import Glibc
import RunLoopKit

struct Member {
    let connection: LoopConnection
    var name: String?  // the first line the member sends
}

let loop = Loop.current
let members = LoopBound([ObjectIdentifier: Member](), on: loop)
let closing = LoopBound(false, on: loop)
let address = try SocketAddress(ipv4: "127.0.0.1", port: 0)
let room = try LoopListener(address: address) { connection in
    let id = ObjectIdentifier(connection)
    members.value[id] = Member(connection: connection)
    connection.onRead { _, buffer in
        while let line = buffer.readLine() {
            guard let name = members.value[id]?.name else {
                let name = String(decoding: line, as: UTF8.self)
                members.value[id]?.name = name
                continue
            }
            let message = Array("\(name): ".utf8) + line + [0x0A]
            for (other, member) in members.value where other != id {
                member.connection.enqueue(message)
            }
        }
    }
    connection.onEvent { _, event in
        guard case .closed = event else { return }  // comes once
        members.value[id] = nil
        if closing.value && members.value.isEmpty { loop.stop() }
    }
}
loop.add(room, forMode: .default)
// The port the clients connect to (the article's room takes any free port). Standard output to a
// pipe is buffered: flushed, so the line is out before the program waits.
print("chat room on port \(room.localAddress.port!)")
fflush(nil)
let terminate = LoopSignalSource(signal: SIGTERM) { _ in
    closing.value = true
    room.invalidate()  // no new members: the listening socket is closed
    if members.value.isEmpty { loop.stop() }
    for member in members.value.values { member.connection.close() }
}
loop.add(terminate, forMode: .default)
loop.run()  // returns once every member has closed after SIGTERM
terminate.invalidate()  // SIGTERM's previous action again
