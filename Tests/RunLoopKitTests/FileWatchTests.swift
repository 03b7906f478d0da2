import Foundation
import Glibc
import Testing

@testable import RunLoopKit

// LoopFileWatch against real programs changing real files: sh appending, mv renaming, rm deleting,
// a directory's children made and removed; two watches on one path; bad paths; the kernel's queue
// made to overflow. Each test drives a loop of its own on a fresh thread.

@Suite(.serialized) struct FileWatchTests {
    typealias Change = LoopFileWatch.Change

    /// A file appended to by `sh -c 'echo x >> file'` is reported modified, on the loop's thread.
    @Test func appendedFileIsReportedModifiedOnTheLoopThread() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("log", contents: "first\n")
        let changes = Recorder<Change>()
        let onLoopThread = Recorder<Bool>()
        let watched = onFreshThread {
            let loop = Loop.current
            guard
                let watch = try? LoopFileWatch(
                    path: file,
                    { _, batch in
                        onLoopThread.append(loop.isCurrentThread)
                        for change in batch { changes.append(change) }
                    })
            else { return false }
            loop.add(watch, forMode: .default)
            runShell("echo x >> '\(file)'")
            runLoop(loop) { changes.events.contains(Change(name: nil, kind: .modified)) }
            watch.invalidate()
            return true
        }
        #expect(watched)
        #expect(changes.events.contains(Change(name: nil, kind: .modified)), "\(changes.events)")
        #expect(!onLoopThread.events.isEmpty && onLoopThread.events.allSatisfy { $0 })
    }

    /// A file renamed away (`mv`) ends its watch: `watchedItemGone` comes last, then the watch is
    /// invalid and its handler is not called again, not even for a new file at the old path.
    @Test func renamedFileReportsItsWatchGoneAndTheWatchEnds() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("moved", contents: "")
        let (batches, validAfter) = watchUntilGone(file, doing: "mv '\(file)' '\(file).new'; echo y > '\(file)'")
        #expect(batches.last?.last == Change(name: nil, kind: .watchedItemGone), "\(batches)")
        #expect(batches.joined().filter { $0.kind == .watchedItemGone }.count == 1, "\(batches)")
        #expect(!validAfter)
    }

    /// A file deleted (`rm`) while watched: `watchedItemGone` last, the watch invalid after it.
    @Test func deletedFileReportsItsWatchGoneAndTheWatchEnds() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("deleted", contents: "bytes")
        let (batches, validAfter) = watchUntilGone(file, doing: "rm '\(file)'")
        #expect(batches.last?.last == Change(name: nil, kind: .watchedItemGone), "\(batches)")
        #expect(batches.joined().filter { $0.kind == .watchedItemGone }.count == 1, "\(batches)")
        #expect(!validAfter)
    }

    /// A directory's children made, written, renamed and deleted, each reported with its name, in
    /// the order they happened.
    @Test func directoryChildrenAreReportedWithTheirNames() throws {
        let directory = try TemporaryDirectory()
        let changes = Recorder<Change>()
        let expected: [Change] = [
            Change(name: "a", kind: .created), Change(name: "b", kind: .created), Change(name: "b", kind: .modified),
            Change(name: "a", kind: .movedFrom), Change(name: "c", kind: .movedTo), Change(name: "b", kind: .deleted),
        ]
        onFreshThread {
            let loop = Loop.current
            let watch = try! LoopFileWatch(path: directory.path) { _, batch in
                for change in batch { changes.append(change) }
            }
            loop.add(watch, forMode: .default)
            runShell("cd '\(directory.path)' && touch a && echo x > b && mv a c && rm b")
            runLoop(loop) { changes.events.contains(Change(name: "b", kind: .deleted)) }
            watch.invalidate()
        }
        // Opening and closing make no changes of these kinds; `touch` may add attribute changes.
        let seen = changes.events.filter { $0.kind != .attributesChanged }
        #expect(seen == expected, "\(changes.events)")
    }

    /// Two watches of one loop on the same path share the kernel's watch and both get its
    /// changes; invalidating one leaves the other watching.
    @Test func twoWatchesOnOnePathBothGetItsChanges() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("shared", contents: "")
        let first = Recorder<Change>()
        let second = Recorder<Change>()
        let kernelWatches = onFreshThread {
            let loop = Loop.current
            let a = try! LoopFileWatch(path: file) { _, batch in for change in batch { first.append(change) } }
            let b = try! LoopFileWatch(path: file) { _, batch in for change in batch { second.append(change) } }
            loop.add(a, forMode: .default)
            loop.add(b, forMode: .default)
            let instance = loop.fileWatchHub?.descriptor ?? -1
            var kernelWatches = [inotifyWatches(of: instance)]
            runShell("echo 1 >> '\(file)'")
            runLoop(loop) { first.count > 0 && second.count > 0 }
            a.invalidate()
            kernelWatches.append(inotifyWatches(of: instance))
            first.removeAll()
            second.removeAll()
            runShell("echo 2 >> '\(file)'")
            runLoop(loop) { second.count > 0 }
            b.invalidate()
            kernelWatches.append(inotifyWatches(of: instance))
            return kernelWatches
        }
        #expect(second.events.contains(Change(name: nil, kind: .modified)), "\(second.events)")
        #expect(first.events.isEmpty, "an invalidated watch was called: \(first.events)")
        #expect(kernelWatches == [1, 1, 0], "the kernel's watches: both, after one, after both")
    }

    /// How many watches the inotify instance `descriptor` has (its `inotify wd:` lines in
    /// /proc/self/fdinfo).
    private func inotifyWatches(of descriptor: Int32) -> Int {
        let info = (try? String(contentsOfFile: "/proc/self/fdinfo/\(descriptor)", encoding: .utf8)) ?? ""
        return info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
    }

    /// A path that does not exist throws ENOENT; a path through a file, ENOTDIR; a path with a
    /// NUL byte, EINVAL. No watch is made.
    @Test func badPathsThrowWithTheirErrno() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("plain", contents: "")
        let cases: [(String, Int32)] = [
            (directory.path + "/missing", ENOENT), (file + "/child", ENOTDIR), (directory.path + "/a\u{0}b", EINVAL),
        ]
        for (path, code) in cases {
            #expect {
                _ = try LoopFileWatch(path: path) { _, _ in }
            } throws: { error in
                (error as? LoopError)?.systemError == code
            }
        }
    }

    /// A path that went between the watch's creation and its adding: the handler gets
    /// `watchedItemGone`, `error` says why (ENOENT), and the watch ends; it never silently waits.
    @Test func aPathGoneBeforeTheWatchIsAddedIsReported() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("brief", contents: "")
        let batches = Recorder<[Change]>()
        let watch = try LoopFileWatch(path: file) { _, batch in batches.append(batch) }
        runShell("rm '\(file)'")
        onFreshThread {
            let loop = Loop.current
            loop.add(watch, forMode: .default)
            runLoop(loop) { batches.count > 0 }
        }
        #expect(batches.events == [[Change(name: nil, kind: .watchedItemGone)]])
        #expect(watch.error?.systemError == ENOENT, "\(String(describing: watch.error))")
        #expect(!watch.isValid)
    }

    /// An invalidated watch's handler is never called again, and is released at once.
    @Test func invalidatedWatchIsNeverCalledAgainAndReleasesItsHandler() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("quiet", contents: "")
        let calls = Recorder<Change>()
        let released = DeinitCounter()
        let releasedAtInvalidate = onFreshThread {
            let loop = Loop.current
            let watch = try! LoopFileWatch(path: file) { [tracked = released.make()] _, batch in
                tracked.touch()
                for change in batch { calls.append(change) }
            }
            loop.add(watch, forMode: .default)
            runShell("echo 1 >> '\(file)'")
            watch.invalidate()
            let releasedAtInvalidate = released.value == 1
            // A timer keeps the mode running while the changes would come.
            loop.add(LoopTimer(after: .seconds(10)) { _ in }, forMode: .default)
            runShell("echo 2 >> '\(file)'")
            loop.run(mode: .default, for: .milliseconds(300))
            return releasedAtInvalidate
        }
        #expect(releasedAtInvalidate)
        #expect(calls.events.isEmpty, "\(calls.events)")
    }

    /// More events than the kernel queues (fs.inotify.max_queued_events) while the loop does not
    /// run: the watch is told with `overflow`, not left to miss changes in silence.
    @Test func kernelQueueOverflowIsReported() throws {
        let directory = try TemporaryDirectory()
        let limit =
            (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 16384
        let changes = Recorder<Change>()
        onFreshThread {
            let loop = Loop.current
            let watch = try! LoopFileWatch(path: directory.path) { _, batch in
                for change in batch { changes.append(change) }
            }
            loop.add(watch, forMode: .default)
            for index in 0..<(limit + 4096) {
                let made = open(directory.path + "/\(index)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
                if made >= 0 { close(made) }
            }
            runLoop(loop) { changes.events.contains(Change(name: nil, kind: .overflow)) }
            watch.invalidate()
        }
        let overflow = changes.events.firstIndex(of: Change(name: nil, kind: .overflow))
        #expect(overflow != nil, "\(changes.count) changes, no overflow")
        #expect(changes.events.filter { $0.kind == .created }.count <= limit)
    }

    // MARK: Helpers

    /// Watches `file`, runs `script`, and runs the loop until the watch reports `watchedItemGone`;
    /// then runs the loop 300 ms more. The batches delivered, and whether the watch was valid then.
    private func watchUntilGone(_ file: String, doing script: String) -> ([[Change]], Bool) {
        let batches = Recorder<[Change]>()
        return
            (onFreshThread {
                let loop = Loop.current
                let watch = try! LoopFileWatch(path: file) { _, batch in batches.append(batch) }
                loop.add(watch, forMode: .default)
                runShell(script)
                runLoop(loop) { batches.events.joined().contains(Change(name: nil, kind: .watchedItemGone)) }
                loop.add(LoopTimer(after: .seconds(10)) { _ in }, forMode: .default)
                runShell("echo z >> '\(file)'")
                loop.run(mode: .default, for: .milliseconds(300))
                return (batches.events, watch.isValid)
            })
    }
}
