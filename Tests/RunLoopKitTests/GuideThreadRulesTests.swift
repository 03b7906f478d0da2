import RunLoopKit
import Synchronization
import Testing

// The handler idioms of the user guide (the DocC articles Concurrency and Threads and lifetimes,
// Sources/RunLoopKit/RunLoopKit.docc), run: state a handler owns, a LoopBound shared by handlers,
// and loop.isolated for a local variable read after a run.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

@Suite(.serialized) struct GuideThreadRulesTests {
    /// A per-connection `var` moved into its read handler, on a worker loop: each connection
    /// numbers its own lines.
    @Test func aConnectionOwnsTheStateMovedIntoItsHandler() async throws {
        let worker = LoopThread(name: "worker")
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
            var lines = 0  // this connection's own: moved into its read handler
            connection.onRead { connection, buffer in
                while let line = buffer.readLine() {
                    lines += 1
                    connection.enqueue(Array("\(lines): ".utf8) + line + [0x0A])
                }
            }
        }
        worker.loop.add(listener, forMode: .default)
        defer { worker.stop() }

        for _ in 0..<2 {
            let client = try await LoopConnection.connect(to: listener.localAddress, on: worker.loop)
            try await client.write(Array("a\nb\n".utf8))
            var answer: [UInt8] = []
            while answer.count(where: { $0 == 0x0A }) < 2 { answer += try await client.read(maxLength: 64) }
            #expect(String(decoding: answer, as: UTF8.self) == "1: a\n2: b\n")
            client.close()
        }
    }

    /// Two handlers of one worker loop share a count through a `LoopBound`.
    @Test func handlersShareStateThroughALoopBound() async {
        printed.removeAll()
        let worker = LoopThread(name: "worker")
        defer { worker.stop() }
        let ticks = LoopBound(0, on: worker.loop)
        let counter = LoopTimer(after: .zero, repeating: .milliseconds(1)) { timer in
            ticks.value += 1
            if ticks.value == 5 { timer.invalidate() }
        }
        let reporter = LoopObserver(activities: .beforeWaiting) { _, _ in
            if ticks.value == 5 { print("five ticks") }
        }
        worker.loop.add(counter, forMode: .default)
        worker.loop.add(reporter, forMode: .default)

        #expect(await eventually { printed.events.contains("five ticks") })
        #expect((try? await worker.loop.submit { ticks.value }) == 5)
        #expect(!ticks.isAccessible)
        reporter.invalidate()
    }

    /// The run-loop idiom on the loop's own thread: a local set by an isolated handler.
    @Test func anIsolatedHandlerSetsALocalOfItsThread() {
        printed.removeAll()
        onFreshThread {
            let loop = Loop.current
            var fired = false
            loop.add(LoopTimer(after: .milliseconds(10), loop.isolated { _ in fired = true }), forMode: .default)
            loop.run(mode: .default, for: .seconds(1))
            print(fired)  // true
        }
        #expect(printed.events == ["true"])
    }
}
