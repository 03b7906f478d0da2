import Foundation
import Glibc
import Testing

/// The built `runloop-httpd`, run as a child process on an ephemeral loopback port.
final class ServerProcess {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let process = Process()
    let port: Int
    private let output = Pipe()

    /// Where the server binary is: next to the test bundle (`<scratch>/<config>/runloop-httpd`), or
    /// `RUNLOOP_HTTPD` if set.
    static func binaryPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["RUNLOOP_HTTPD"] { return path }
        var candidates: [URL] = []
        let argument0 = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        candidates.append(argument0.deletingLastPathComponent())
        candidates.append(Bundle.main.bundleURL)
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent())
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            candidates.append(bundle.bundleURL.deletingLastPathComponent())
        }
        for directory in candidates {
            let path = directory.appendingPathComponent("runloop-httpd").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw Failure(description: "runloop-httpd not found next to the tests (looked in \(candidates.map(\.path)))")
    }

    /// Starts the server with `arguments` (plus `--port 0`) and waits for its `listening on` line.
    init(_ arguments: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: try ServerProcess.binaryPath())
        process.arguments = ["--port", "0"] + arguments
        process.standardOutput = output
        try process.run()
        let line = try ServerProcess.readLine(from: output.fileHandleForReading.fileDescriptor, timeout: 10)
        guard let range = line.range(of: "listening on 127.0.0.1:"),
            let port = Int(line[range.upperBound...].prefix { $0.isNumber })
        else {
            kill(process.processIdentifier, SIGKILL)
            throw Failure(description: "unexpected first line from the server: \(line)")
        }
        self.port = port
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Sends `signal` and waits up to `timeout` seconds for the process to exit; returns its status.
    func stop(with signal: Int32 = SIGTERM, timeout: Double = 10) throws -> Int32 {
        kill(process.processIdentifier, signal)
        return try waitForExit(timeout: timeout)
    }

    func waitForExit(timeout: Double) throws -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            guard Date() < deadline else { throw Failure(description: "the server did not exit within \(timeout) s") }
            usleep(10_000)
        }
        guard process.terminationReason == .exit else {
            throw Failure(description: "the server died of signal \(process.terminationStatus)")
        }
        return process.terminationStatus
    }

    /// A new connection to the server.
    func connect() throws -> TestClient { try TestClient(port: port) }

    private static func readLine(from fd: Int32, timeout: Double) throws -> String {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while !bytes.contains(10) {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw Failure(description: "no output from the server within \(timeout) s") }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(remaining * 1000) + 1) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { throw Failure(description: "the server exited before listening") }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A blocking loopback client with a receive timeout on every read, so a broken server fails a
/// test instead of hanging it.
final class TestClient {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    enum ReadError: Error, Equatable {
        case timedOut
        case closed
        case reset
        case malformed(String)
    }

    private(set) var fd: Int32
    private var pending: [UInt8] = []

    init(port: Int, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServerProcess.Failure(description: "socket: errno \(errno)") }
        var time = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw ServerProcess.Failure(description: "connect to port \(port): errno \(code)")
        }
    }

    deinit { close() }

    /// Closes the client's socket (idempotent).
    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw ServerProcess.Failure(description: "send: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads more bytes into `pending`.
    private func fill() throws(ReadError) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            pending += buffer[..<count]
        } else if count == 0 {
            throw .closed
        } else if errno == EAGAIN || errno == EWOULDBLOCK {
            throw .timedOut
        } else {
            throw .reset
        }
    }

    /// Reads one response (status line, headers, `Content-Length` body; no body if `head`).
    func readResponse(head: Bool = false) throws(ReadError) -> Response {
        let end: Int
        while true {
            if let found = TestClient.find([13, 10, 13, 10], in: pending) {
                end = found + 4
                break
            }
            try fill()
        }
        let text = String(decoding: pending[..<end], as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0] == "HTTP/1.1", let status = Int(statusLine[1]) else {
            throw .malformed(text)
        }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw .malformed(text) }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let length = head ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        while pending.count < end + length { try fill() }
        let body = String(decoding: pending[end..<end + length], as: UTF8.self)
        pending.removeFirst(end + length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Waits for the server to close the connection, then closes the client's end too, as a
    /// client does; returns the seconds it took.
    func waitForClose() throws(ReadError) -> Double {
        let start = Date()
        while true {
            do {
                try fill()
                pending.removeAll()
            } catch .closed, .reset {
                close()
                return Date().timeIntervalSince(start)
            }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i..<i + needle.count].elementsEqual(needle) {
            return i
        }
        return nil
    }
}

func get(_ path: String, _ extra: String = "") -> String {
    "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(extra)\r\n"
}

/// Runs `body`, which blocks (it waits for a child process and for sockets), as the calling task
/// on a thread of its own rather than on one of Swift concurrency's few shared threads: on a
/// loaded two-core machine, blocking tests that hold those threads stall every other test of
/// the run, whose awaits cannot resume until a thread is free. The task stays the test's own, so
/// `#expect` inside `body` is reported against the test.
func onOwnThread<T: Sendable>(_ body: () throws -> T) async throws -> T {
    try await withTaskExecutorPreference(ThreadPerJobExecutor()) {
        precondition(ThreadPerJobExecutor.isCurrent, "the test's body is not on its own thread")
        return try body()
    }
}

/// A task executor that runs each job it is given on a new thread.
final class ThreadPerJobExecutor: TaskExecutor {
    static let threadName = "test-own-thread"

    /// Whether the calling thread is one of this executor's.
    static var isCurrent: Bool { Thread.current.threadDictionary[threadName] != nil }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        Thread {
            Thread.current.threadDictionary[ThreadPerJobExecutor.threadName] = true
            job.runSynchronously(on: executor)
        }.start()
    }
}
