import Foundation

/// Memory figures are RSS deltas, and an RSS delta is only clean in a process whose heap has not
/// been through the other workloads (freed memory is reused without growing RSS). So the benchmark
/// measures them in a fresh child process of itself (`runloop-bench --memory-probe …`); where the
/// running executable is not `runloop-bench` (the smoke test), it measures in-process.
enum MemoryProbe {
    enum Kind: String, Sendable {
        case timer, loop, connection
    }

    static let flag = "--memory-probe"

    /// The benchmark executable, if this process is it.
    static let executable: String? = {
        guard let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
            (path as NSString).lastPathComponent == "runloop-bench"
        else { return nil }
        return path
    }()

    static func measure(_ implementation: Implementation, _ kind: Kind, count: Int, timeout: Double) -> Outcome<Double>
    {
        guard let executable else { return inProcess(implementation, kind, count: count) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [flag, implementation.rawValue, kind.rawValue, "\(count)"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            try process.run()
        } catch {
            return .failure(BenchError(reason: "cannot start the memory probe: \(error)"))
        }
        let text = output.fileHandleForReading.readDataToEndOfFile()
        guard exited.wait(timeout: .now() + timeout) == .success else {
            process.terminate()
            return .failure(.timedOut)
        }
        let reply = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if process.terminationStatus == 0, let bytes = Double(reply) { return .success(bytes) }
        return .failure(BenchError(reason: reply.isEmpty ? "memory probe failed" : reply))
    }

    static func inProcess(_ implementation: Implementation, _ kind: Kind, count: Int) -> Outcome<Double> {
        switch kind {
        case .timer: implementation.contender.memoryPerTimer(count: count)
        case .loop: implementation.contender.memoryPerLoop(count: count)
        case .connection: Workloads.memoryPerConnection(implementation, count: count, timeout: 60)
        }
    }

    /// The child's side: `--memory-probe IMPLEMENTATION timer|loop|connection COUNT`; prints bytes per item.
    static func main(_ arguments: [String]) -> Int32 {
        guard arguments.count == 3, let implementation = Implementation(rawValue: arguments[0]),
            let kind = Kind(rawValue: arguments[1]), let count = Int(arguments[2]), count > 0
        else {
            print("usage: runloop-bench \(flag) IMPLEMENTATION timer|loop|connection COUNT")
            return 2
        }
        switch inProcess(implementation, kind, count: count) {
        case .success(let bytes):
            print(bytes)
            return 0
        case .failure(let error):
            print(error.reason)
            return 1
        }
    }
}
