import Foundation
import Glibc
import RunLoopKit
import Testing

/// Listening sockets the process did not make itself: one adopted from a descriptor, and those
/// `systemd-socket-activate` (systemd's own tool) passes to a server it starts.
@Suite struct ListenerAdoptionTests {
    /// A Unix listening socket made with the system calls, blocking, as a supervisor would hand
    /// it over: adopted, it accepts on its loop, and its path is not the listener's to remove.
    @Test func anAdoptedListeningSocketAccepts() async throws {
        let path = temporaryUnixPath("adopted")
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(descriptor >= 0)
        #expect(bindUnix(descriptor, path) == 0)
        #expect(listen(descriptor, 16) == 0)
        let thread = LoopThread(name: "adopted")
        defer { thread.stop() }
        let listener = try LoopListener.adopting(descriptor: descriptor) { connection in
            connection.enqueue(Array("adopted\n".utf8))
            connection.close()
        }
        #expect(listener.localAddress == (try SocketAddress(unixPath: path)))
        // Made non-blocking and close-on-exec.
        #expect(fcntl(descriptor, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0)
        thread.loop.add(listener, forMode: .default)
        let reply = try runPython(
            """
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(sys.argv[1])
            print(s.recv(100).decode(), end="")
            """, [path]
        ).output
        #expect(reply == "adopted\n")
        listener.invalidate()
        #expect(access(path, F_OK) == 0)
        unlink(path)
    }

    /// Not open, not a socket, not a stream socket, not listening: each a clear error, the
    /// descriptor left open.
    @Test func whatCannotBeAdoptedIsRefused() throws {
        let closed = open("/dev/null", O_RDONLY)
        close(closed)
        let notOpen = #expect(throws: LoopError.self) { try LoopListener.adopting(descriptor: closed) { _ in } }
        #expect(notOpen?.systemError == EBADF)

        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        defer { for end in pipeEnds { close(end) } }
        let notSocket = #expect(throws: LoopError.self) { try LoopListener.adopting(descriptor: pipeEnds[0]) { _ in } }
        #expect(notSocket?.systemError == ENOTSOCK)
        #expect(fcntl(pipeEnds[0], F_GETFD) >= 0)

        let datagram = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(datagram) }
        let notStream = #expect(throws: LoopError.self) { try LoopListener.adopting(descriptor: datagram) { _ in } }
        #expect(notStream?.systemError == EINVAL)

        let stream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(stream) }
        let notListening = #expect(throws: LoopError.self) { try LoopListener.adopting(descriptor: stream) { _ in } }
        #expect(notListening?.systemError == EINVAL)
        #expect(notListening?.message.contains("not listening") == true)
        #expect(fcntl(stream, F_GETFD) >= 0)
    }

    /// WritingAServer.md's socket-activated server under `systemd-socket-activate`: it takes the
    /// Unix socket the tool passed, serves two clients, finds LISTEN_FDS removed from its
    /// environment, and ends on SIGTERM.
    @Test func aServerStartedBySystemdSocketActivateTakesItsListener() async throws {
        let tool = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: tool), "make deps installs systemd")
        let path = temporaryUnixPath("activated")
        // The tool gives the server a fresh environment: a sanitizer's settings (no leak check
        // at exit, as for the tests) are passed on by name.
        let passed = ["ASAN_OPTIONS", "TSAN_OPTIONS"].filter { ProcessInfo.processInfo.environment[$0] != nil }
        let program = try RunningProgram.start(
            path: tool, name: "systemd-socket-activate",
            arguments: ["-l", path] + passed.flatMap { ["-E", $0] }
                + [try RunningProgram.path(of: "example-socket-activated")])
        // The tool listens, then starts the server at the first connection.
        let replies = try runPython(
            """
            import socket, sys, time
            deadline = time.time() + 20
            while True:
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(20)
                    s.connect(sys.argv[1])
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    if time.time() > deadline: raise
                    time.sleep(0.05)
            print(s.recv(100).decode(), end="")
            s.close()
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(20)
            s.connect(sys.argv[1])
            print(s.recv(100).decode(), end="")
            """, [path]
        ).output
        #expect(replies == String(repeating: "hello from a socket-activated server\n", count: 2))
        #expect(await program.waitForOutput("LISTEN_FDS"))
        program.send(SIGTERM)
        let outcome = await program.finish()
        #expect(outcome.termination == .exited(0), "\(outcome)")
        #expect(outcome.lines.contains("1 listener(s); LISTEN_FDS removed"), "\(outcome)")
        #expect(outcome.lines.last == "stopped", "\(outcome)")
        unlink(path)
    }
}

/// `bind` of `descriptor` to the Unix socket `path`.
private func bindUnix(_ descriptor: Int32, _ path: String) -> Int32 {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { bytes in
        for (index, byte) in path.utf8.prefix(bytes.count - 1).enumerated() { bytes[index] = byte }
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
}
