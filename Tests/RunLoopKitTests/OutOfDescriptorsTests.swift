import Dispatch
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// What happens when the process runs out of descriptors: creating a loop throws instead of
/// stopping the process. Each test runs in a child process whose descriptor limit is lowered and whose
/// every descriptor number below it is taken, so that the test process itself never runs out.
@Suite struct OutOfDescriptorsTests {
    /// `LoopThread.start(name:)` and `LoopGroup.start(threads:name:)` throw `EMFILE` wherever the
    /// descriptors run out (the eventfd, libevent's base, the timerfd), leaving no descriptor,
    /// thread or memory behind, and succeed as soon as enough are free again.
    @Test func startingALoopOutOfDescriptorsThrowsAndLeavesNothingBehind() async {
        await #expect(processExitsWith: .success) {
            var fillers = exhaustDescriptors()
            // One more free descriptor at a time until a loop can be created.
            var free = 0
            var started: LoopThread?
            while started == nil {
                do throws(LoopError) {
                    started = try LoopThread.start(name: "fd-probe-\(free)")
                } catch {
                    guard error.systemError == EMFILE else { childFailure("with \(free) free: \(error)") }
                    guard freeDescriptors() == free else { childFailure("with \(free) free: a descriptor leaked") }
                    guard free < 16 else { childFailure("no loop with 16 descriptors free") }
                    Platform.closeDescriptor(fillers.removeLast())
                    free += 1
                }
            }
            // The eventfd, room for libevent's epoll and signal pipe (3), the timerfd: each ran out
            // once, and what was opened before it was closed again.
            guard free == 5 else { childFailure("a loop was created with \(free) descriptors free, not 5") }
            guard runsABlock(started!.loop) else {
                childFailure("the loop created after freeing descriptors does not run")
            }
            started = nil  // stopped and released: its descriptors are closed
            guard freeDescriptors() == free else { childFailure("a stopped loop thread left a descriptor open") }

            // The failure that gets furthest (the eventfd and libevent's base open, the timerfd
            // not), many times over: the loop made on the way goes with its thread. Measured after a
            // warm-up: the resident set grows by some 200 KiB once, whether 2,000 or 8,000 starts
            // fail, where a leaked `LoopThread`'s state alone was 1.2 MiB for 2,000.
            fillers.append(Platform.openPlaceholderDescriptor())
            func failToStart(_ times: Int) {
                for _ in 0..<times {
                    do throws(LoopError) {
                        _ = try LoopThread.start(name: "fd-probe-x")
                        childFailure("a loop was created with \(free - 1) descriptors free")
                    } catch {
                        guard error.systemError == EMFILE else { childFailure("\(error)") }
                    }
                }
            }
            failToStart(200)
            let residentBefore = residentKiB()
            failToStart(4_000)
            let grown = residentKiB() - residentBefore
            guard grown < 1_024 else { childFailure("4,000 failed starts grew the resident set by \(grown) KiB") }
            guard freeDescriptors() == free - 1 else { childFailure("failed starts left a descriptor open") }

            // A group whose second thread cannot have its loop stops its first before throwing.
            Platform.closeDescriptor(fillers.removeLast())
            do throws(LoopError) {
                _ = try LoopGroup.start(threads: 3, name: "fd-group")
                childFailure("a group of 3 was started with room for 1 loop")
            } catch {
                guard error.systemError == EMFILE else { childFailure("group: \(error)") }
            }
            guard freeDescriptors() == free else { childFailure("a failed group left a descriptor open") }

            for filler in fillers { Platform.closeDescriptor(filler) }
            guard let group = try? LoopGroup.start(threads: 3, name: "fd-group") else {
                childFailure("no group once the descriptors are back")
            }
            guard group.loops.allSatisfy(runsABlock) else { childFailure("a group's loop does not run") }
            group.shutdown()
            // Every thread of a failed start has been joined: none of their names is left.
            let left = threadNames().filter { $0.hasPrefix("fd-") }
            guard left.isEmpty else { childFailure("threads left behind: \(left)") }
            exit(0)
        }
    }

    /// The non-throwing `LoopThread(name:)` still stops the process, saying in plain words that
    /// descriptors ran out and what throws instead.
    @Test func aLoopThreadThatCannotStartStopsTheProcessWithAPlainMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = exhaustDescriptors()
            _ = LoopThread(name: "fd-trap")
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("the process has run out of file descriptors"))
        #expect(message.contains("try LoopThread.start(name:)"))
    }
}

/// How many descriptors can still be opened, found by opening them (none is left open).
private func freeDescriptors() -> Int {
    var opened: [Int32] = []
    while true {
        let descriptor = Platform.openPlaceholderDescriptor()
        guard descriptor >= 0 else { break }
        opened.append(descriptor)
    }
    for descriptor in opened { Platform.closeDescriptor(descriptor) }
    return opened.count
}

/// Whether `loop` runs a posted block within 5 s.
private func runsABlock(_ loop: Loop) -> Bool {
    let ran = DispatchSemaphore(value: 0)
    loop.perform { ran.signal() }
    return ran.wait(timeout: .now() + 5) == .success
}

/// The names of this process's threads.
private func threadNames() -> [String] {
    guard let tasks = opendir("/proc/self/task") else { return [] }
    defer { closedir(tasks) }
    var names: [String] = []
    while let entry = readdir(tasks) {
        let id = withUnsafePointer(to: &entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 1) { String(cString: $0) }
        }
        guard id.first?.isNumber == true, let file = fopen("/proc/self/task/\(id)/comm", "r") else { continue }
        var line = [CChar](repeating: 0, count: 64)
        if fgets(&line, 64, file) != nil {
            names.append(
                String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        fclose(file)
    }
    return names
}

/// The process's resident set in KiB (`/proc/self/statm`, which takes one descriptor to read).
private func residentKiB() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { childFailure("/proc/self/statm: errno \(errno)") }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 128)
    guard fgets(&line, 128, file) != nil else { childFailure("/proc/self/statm unreadable") }
    let fields = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).split(
        separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { childFailure("/proc/self/statm: \(fields)") }
    return pages * sysconf(Int32(_SC_PAGESIZE)) / 1024
}
