import Foundation
import Testing

@testable import RunLoopKit

// Files for the file-watch tests: a directory of a test's own, shell commands run to completion,
// and a loop run until what a test waits for has happened.

/// Runs `loop` in `mode` until `done()` holds, for at most 5 s.
func runLoop(_ loop: Loop, mode: Loop.Mode = .default, until done: () -> Bool) {
    let deadline = ContinuousClock.now + .seconds(5)
    while !done() && ContinuousClock.now < deadline {
        loop.run(mode: mode, for: .milliseconds(50))
    }
}

/// Runs `script` with `/bin/sh -c` and waits for it to exit.
func runShell(_ script: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script]
    do {
        try process.run()
        process.waitUntilExit()
    } catch {
        Issue.record("sh -c \(script): \(error)")
    }
}

/// A directory of its own under the temporary directory, removed with its contents when it goes.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("watch-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    /// Creates the file `name` with `contents`; its path.
    func file(_ name: String, contents: String) -> String {
        let file = path + "/" + name
        precondition(
            FileManager.default.createFile(atPath: file, contents: Data(contents.utf8)), "cannot create \(file)")
        return file
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
