import Foundation
import Glibc
import Testing

@testable import RunLoopKit

// A file watch as a loop item: its modes, what the loop keeps, an ended loop, and the loop's one
// inotify descriptor. Nested in FileWatchTests, so that no two tests count inotify descriptors at
// once.

extension FileWatchTests {
    @Suite struct Lifecycle {
        typealias Change = LoopFileWatch.Change

        /// Every watch of a loop is read through one inotify descriptor, opened at the first watch
        /// added and closed when the loop's thread exits.
        @Test func oneInotifyDescriptorPerLoopClosedAtTheEnd() throws {
            let directory = try TemporaryDirectory()
            let files = (0..<3).map { directory.file("f\($0)", contents: "") }
            _ = try LoopFileWatch(path: directory.path) { _, _ in }  // the process-wide check's own
            let before = inotifyDescriptors()
            let (whileWatched, beforeAdding) = onFreshThread {
                let loop = Loop.current
                let beforeAdding = inotifyDescriptors()
                for file in files + [directory.path] {
                    loop.add(try! LoopFileWatch(path: file) { _, _ in }, forMode: .default)
                }
                return (inotifyDescriptors(), beforeAdding)
            }
            #expect(beforeAdding == before)
            #expect(whileWatched == before + 1)
            // The thread exits (and tears its loop down) just after it has handed its result over.
            #expect(waitUntil { inotifyDescriptors() == before }, "the loop's descriptor outlived its thread")

            // The same for a loop that ran, told from another thread, whose watches all left (the
            // descriptor stays open for the next one), kept by its LoopThread after its end.
            let worker = LoopThread(name: "watches")
            let watches = try files.map { file in try LoopFileWatch(path: file) { _, _ in } }
            for watch in watches { worker.loop.add(watch, forMode: .default) }
            #expect(waitUntil { worker.loop.isWaiting })
            #expect(inotifyDescriptors() == before + 1)
            for watch in watches { worker.loop.remove(watch, forMode: .default) }
            #expect(inotifyDescriptors() == before + 1)
            worker.stop()
            #expect(inotifyDescriptors() == before, "the loop's descriptor outlived its LoopThread")
        }

        /// A watch in a mode that is not running waits: its changes come, as one batch, when a mode
        /// holding it runs, even if another watch of the loop was served meanwhile.
        @Test func changesWaitForAModeOfTheWatch() throws {
            let directory = try TemporaryDirectory()
            let file = directory.file("waiting", contents: "")
            let batches = Recorder<[Change]>()
            let other = Recorder<Change>()
            let (beforeItsMode, mode) = onFreshThread {
                let loop = Loop.current
                let mode = Loop.Mode("files")
                let watch = try! LoopFileWatch(path: file) { _, batch in batches.append(batch) }
                let neighbour = try! LoopFileWatch(path: directory.path) { _, batch in
                    for change in batch { other.append(change) }
                }
                loop.add(watch, forMode: mode)
                loop.add(neighbour, forMode: .default)
                runShell("echo 1 >> '\(file)'; chmod 600 '\(file)'")
                runLoop(loop) { other.count >= 2 }  // the neighbour reports both; the default mode reads them
                let beforeItsMode = batches.count
                runLoop(loop, mode: mode) { batches.count > 0 }
                watch.invalidate()
                neighbour.invalidate()
                return (beforeItsMode, mode)
            }
            #expect(mode == "files")
            #expect(beforeItsMode == 0)
            #expect(
                batches.events == [[Change(name: nil, kind: .modified), Change(name: nil, kind: .attributesChanged)]],
                "\(batches.events)")
        }

        /// A watch whose mode does not run holds at most 65536 changes: past them it records one
        /// `overflow`, while a watch of the running mode, on the same directory, gets every change.
        @Test func aWatchWaitingForItsModeHoldsBoundedChanges() throws {
            let directory = try TemporaryDirectory()
            let (waiting, served) = onFreshThread {
                let loop = Loop.current
                var waiting: [Change] = []
                var served = 0
                let watch = try! LoopFileWatch(path: directory.path, loop.isolated { _, batch in waiting += batch })
                let neighbour = try! LoopFileWatch(
                    path: directory.path, loop.isolated { _, batch in served += batch.count })
                loop.add(watch, forMode: "files")
                loop.add(neighbour, forMode: .default)
                // In rounds the kernel's queue holds, each read by the default mode.
                for round in 0..<7 {
                    for index in 0..<10_000 {
                        let made = open(directory.path + "/\(round)-\(index)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
                        if made >= 0 { close(made) }
                    }
                    runLoop(loop) { served >= (round + 1) * 10_000 }
                }
                runLoop(loop, mode: "files") { !waiting.isEmpty }
                watch.invalidate()
                neighbour.invalidate()
                return (waiting, served)
            }
            #expect(served == 70_000)
            #expect(waiting.count == 65_537)
            #expect(waiting.last == Change(name: nil, kind: .overflow))
            #expect(waiting.dropLast().allSatisfy { $0.kind == .created })
        }

        /// A watch added with no other reference to it is kept by the loop and goes on reporting.
        @Test func theLoopKeepsAWatchItHolds() throws {
            let directory = try TemporaryDirectory()
            let file = directory.file("kept", contents: "")
            let changes = Recorder<Change>()
            onFreshThread {
                let loop = Loop.current
                loop.add(
                    try! LoopFileWatch(path: file) { _, batch in for change in batch { changes.append(change) } },
                    forMode: .default)
                runShell("echo 1 >> '\(file)'")
                runLoop(loop) { changes.count > 0 }
            }
            #expect(changes.events.contains(Change(name: nil, kind: .modified)), "\(changes.events)")
        }

        /// A watch in no loop goes with its last reference, releasing its handler.
        @Test func aWatchInNoLoopGoesWithItsLastReference() throws {
            let directory = try TemporaryDirectory()
            let released = DeinitCounter()
            var watch: LoopFileWatch? = try LoopFileWatch(path: directory.path) { [tracked = released.make()] _, _ in
                tracked.touch()
            }
            #expect(watch?.isValid == true)
            watch = nil
            #expect(released.value == 1)
        }

        /// Adding to a loop that has ended does nothing and leaves the watch free for another loop.
        @Test func addingToAnEndedLoopLeavesTheWatchFree() throws {
            let directory = try TemporaryDirectory()
            let file = directory.file("free", contents: "")
            let changes = Recorder<Change>()
            let watch = try LoopFileWatch(path: file) { _, batch in for change in batch { changes.append(change) } }
            let ended = endedLoop()
            ended.add(watch, forMode: .default)
            #expect(!ended.contains(watch, inMode: .default))
            #expect(watch.isValid)
            onFreshThread {
                let loop = Loop.current
                loop.add(watch, forMode: .default)
                runShell("echo 1 >> '\(file)'")
                runLoop(loop) { changes.count > 0 }
                watch.invalidate()
            }
            #expect(changes.events.contains(Change(name: nil, kind: .modified)), "\(changes.events)")
        }

        /// Removed from its last mode, a watch stops watching (changes meanwhile are not recorded);
        /// added again, it reports what comes after. Removing one of two watches sharing a path
        /// keeps the other's kernel watch.
        @Test func removedFromItsLastModeAWatchStopsUntilAddedAgain() throws {
            let directory = try TemporaryDirectory()
            let changes = Recorder<Change>()
            let sharing = Recorder<Change>()
            onFreshThread {
                let loop = Loop.current
                let watch = try! LoopFileWatch(path: directory.path) { _, batch in
                    for change in batch { changes.append(change) }
                }
                let other = try! LoopFileWatch(path: directory.path) { _, batch in
                    for change in batch { sharing.append(change) }
                }
                loop.add(watch, forMode: .default)
                loop.add(other, forMode: .default)
                loop.remove(watch, forMode: .default)
                runShell("touch '\(directory.path)/unseen'")
                runLoop(loop) { sharing.events.contains(Change(name: "unseen", kind: .created)) }
                loop.add(watch, forMode: .default)
                runShell("touch '\(directory.path)/seen'")
                runLoop(loop) { changes.events.contains(Change(name: "seen", kind: .created)) }
                watch.invalidate()
                other.invalidate()
            }
            #expect(sharing.events.contains(Change(name: "unseen", kind: .created)), "\(sharing.events)")
            #expect(changes.events.contains(Change(name: "seen", kind: .created)), "\(changes.events)")
            #expect(!changes.events.contains { $0.name == "unseen" }, "\(changes.events)")
        }

        /// Another thread adds a watch to a running loop and invalidates it; the watch reports on
        /// the loop's thread meanwhile.
        @Test func anyThreadAddsAndInvalidates() throws {
            let directory = try TemporaryDirectory()
            let file = directory.file("remote", contents: "")
            let worker = LoopThread(name: "watcher")
            defer { worker.stop() }
            let onLoopThread = Recorder<Bool>()
            let loop = worker.loop
            let watch = try LoopFileWatch(path: file) { _, _ in onLoopThread.append(loop.isCurrentThread) }
            loop.add(watch, forMode: .common)
            #expect(loop.contains(watch, inMode: .common))
            runShell("echo 1 >> '\(file)'")
            #expect(waitUntil { onLoopThread.count > 0 })
            watch.invalidate()
            #expect(!watch.isValid)
            #expect(!loop.contains(watch, inMode: .default))
            #expect(onLoopThread.events.allSatisfy { $0 })
        }
    }
}

/// How many inotify descriptors the process has open.
private func inotifyDescriptors() -> Int {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return entries.filter { entry in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + entry)) == "anon_inode:inotify"
    }.count
}
