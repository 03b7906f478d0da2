import Dispatch
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// State that only a loop's thread, or only the holder of a lock, may touch is reached through
/// accessors that check it in debug builds: the library's own paths pass the checks (here, and in
/// every other test of a debug build), and a wrong thread or a missing lock stops the process with
/// a message naming the type (shown in child processes).
@Suite struct StateCheckTests {
    /// Blocks posted from other threads (the loop's block buffers), scheduled blocks run, cancelled
    /// from another thread and left to the teardown (`LoopScheduled`), pool work run and cancelled
    /// (`LoopWork`), and a descriptor source added, removed, re-added and invalidated (the event
    /// backend's `watch`, `forget` and `arm`).
    @Test func theLibrarysOwnPathsPassTheChecks() {
        let thread = LoopThread(name: "checked")
        let loop = thread.loop
        let pool = LoopWorkPool(name: "checked", threads: 2)
        let ran = Atomic<Int>(0)
        let completions = Atomic<Int>(0)
        let cancelledWork = Atomic<Int>(0)

        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for index in 0..<250 {
                loop.perform(inModes: index % 5 == 0 ? [.default, .tracking] : [.common]) {
                    ran.add(1, ordering: .relaxed)
                }
            }
        }
        let scheduled = (0..<100).map { index in
            loop.schedule(after: .milliseconds(index % 2 == 0 ? 1 : 3_600_000)) { ran.add(1, ordering: .relaxed) }
        }
        // The far ones are cancelled from here; the teardown cancels one left pending.
        for handle in scheduled.enumerated().filter({ $0.offset % 2 == 1 }).dropFirst().map(\.element) {
            handle.cancel()
        }
        let gate = DispatchSemaphore(value: 0)
        let work = (0..<20).map { index in
            pool.run({ if index == 0 { gate.wait() } }, completingOn: loop) { result in
                if case .failure = result { cancelledWork.add(1, ordering: .relaxed) }
                completions.add(1, ordering: .relaxed)
            }
        }
        let cancelled = work.dropFirst(10).filter { $0.cancel() }.count
        gate.signal()

        var descriptors: [Int32] = [-1, -1]
        #expect(pipe(&descriptors) == 0)
        let readable = Atomic<Int>(0)
        let source = try! LoopDescriptorSource(fileDescriptor: descriptors[0], events: .readable) { source, _ in
            var byte: UInt8 = 0
            _ = read(source.fileDescriptor, &byte, 1)
            readable.add(1, ordering: .relaxed)
        }
        loop.add(source, forMode: .default)
        _ = write(descriptors[1], "x", 1)
        #expect(waitUntil { readable.load(ordering: .relaxed) == 1 })
        loop.remove(source, forMode: .default)
        loop.add(source, forMode: .common)
        _ = write(descriptors[1], "y", 1)

        #expect(
            waitUntil {
                ran.load(ordering: .relaxed) == 1_050 && completions.load(ordering: .relaxed) == 20
                    && readable.load(ordering: .relaxed) == 2
            })
        #expect(cancelledWork.load(ordering: .relaxed) == cancelled)
        source.invalidate()
        thread.stop()
        pool.shutdown()
        close(descriptors[0])
        close(descriptors[1])
        #expect(scheduled[1].isCancelled)
    }

    // MARK: The checks stop a wrong caller (debug builds; each in a child process)

    @Test(.enabled(if: _isDebugAssertConfiguration()), arguments: Misuse.allCases)
    func aWrongCallerStopsWithAMessageNamingTheType(_ misuse: Misuse) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [misuse] in
            misuse.commit()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains(misuse.message))
    }
}

/// Each way of breaking a check, and what the check says.
enum Misuse: String, Codable, Sendable, CaseIterable {
    case blockBufferOffItsLoopsThread
    case scheduledBlockRunOffItsLoopsThread
    case scheduledQueuePlaceWithoutTheQueueLock
    case poolWorkWithoutThePoolsLock
    case eventBackendOffItsThread
    case loopThreadStateOffItsThread

    var message: String {
        switch self {
        case .blockBufferOffItsLoopsThread: "RunLoopKit: BlockBuffer's blocks touched off its loop's thread"
        case .scheduledBlockRunOffItsLoopsThread: "RunLoopKit: LoopScheduled's block run off its loop's thread"
        case .scheduledQueuePlaceWithoutTheQueueLock:
            "RunLoopKit: LoopScheduled's queue place touched without its loop's queue lock"
        case .poolWorkWithoutThePoolsLock: "RunLoopKit: LoopWork's state touched without its pool's lock"
        case .eventBackendOffItsThread: "RunLoopKit: LibeventBackend used off its loop's thread"
        case .loopThreadStateOffItsThread: "RunLoopKit: Loop's thread state touched off its loop's thread"
        }
    }

    /// Does it, on a thread that is not the loop's and holds no lock. A check of lock-guarded
    /// state runs many times: another thread may hold the lock at any one moment.
    func commit() {
        let thread = LoopThread(name: "owner")
        switch self {
        case .blockBufferOffItsLoopsThread:
            BlockBuffer(owner: thread.loop.link).append(LoopBlock(.closure {}))
        case .scheduledBlockRunOffItsLoopsThread:
            _ = thread.loop.schedule(after: .seconds(3_600)) {}.runIfPending()
        case .scheduledQueuePlaceWithoutTheQueueLock:
            let handle = thread.loop.schedule(after: .seconds(3_600)) {}
            for _ in 0..<1_000_000 { _ = handle.place.state }
        case .poolWorkWithoutThePoolsLock:
            let work = LoopWorkPool(name: "checked", threads: 1).run({}, completingOn: thread.loop) { _ in }
            for _ in 0..<1_000_000 { _ = work.phase }
        case .eventBackendOffItsThread:
            let made = onFreshThread {
                UncheckedBox(try! LibeventBackend(wakeDescriptor: Platform.makeEventDescriptor()))
            }
            _ = made.value.hasPollableEvents
        case .loopThreadStateOffItsThread:
            _ = thread.loop.onThread.spin
        }
    }
}
