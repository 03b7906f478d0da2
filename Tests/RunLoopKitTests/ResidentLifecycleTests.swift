import Glibc
import Testing

@testable import RunLoopKit

/// The lifecycle a listener and a datagram socket share, driven directly (each row of its
/// transition table, and every step it does not list refused by the check debug builds make),
/// and as real items answer it.
@Suite struct ResidentLifecycleTests {
    typealias Lifecycle = ResidentLifecycle

    enum LifecycleEvent: Sendable {
        case invalidationBegan
        case finish
    }

    /// The outcome: whether this step is the one to let go of what the item holds.
    typealias LifecycleRow = TransitionRow<Lifecycle, LifecycleEvent, Bool>

    static let lifecycleRows: [LifecycleRow] = [
        LifecycleRow(.open, .invalidationBegan, .invalidated, false),
        LifecycleRow(.invalidated, .invalidationBegan, .invalidated, false),
        LifecycleRow(.finished, .invalidationBegan, .finished, false),
        LifecycleRow(.open, .finish, .finished, true),
        LifecycleRow(.invalidated, .finish, .finished, true),
        LifecycleRow(.finished, .finish, .finished, false),
    ]

    @Test(arguments: lifecycleRows)
    func eachRowOfTheLifecycleTable(_ row: LifecycleRow) {
        var state = row.from
        var letsGo = false
        switch row.event {
        case .invalidationBegan: state.invalidationBegan()
        case .finish: letsGo = state.finish()
        }
        #expect(state == row.to)
        #expect(letsGo == row.outcome)
        #expect(Lifecycle.mayChange(row.from, to: row.to))
        #expect(state.isOpen == (state == .open))
    }

    /// The lifecycle is what a real socket answers: open in a loop, and invalid once the loop's
    /// thread has ended and its teardown invalidated the socket's source, which tells the socket
    /// (receives, awaited sends and options then throw).
    @Test func aDatagramSocketWhoseLoopEndedReadsInvalid() async throws {
        let thread = LoopThread(name: "datagram-lifecycle")
        let socket = try LoopDatagramSocket(bindingTo: SocketAddress(ipv4: "127.0.0.1", port: 0))
        socket.onReceive { _, _, _ in }
        thread.loop.add(socket, forMode: .default)
        #expect(socket.isValid)
        thread.stop()
        #expect(waitUntil { !socket.isValid })
        await #expect(throws: LoopError.self) { try await socket.receive() }
        await #expect(throws: LoopError.self) { try await socket.send([1], to: socket.localAddress) }
        #expect(throws: LoopError.self) { try socket.setReceiveBufferSize(65536) }
    }

    /// A listener whose loop's thread ended reads invalid: the loop's teardown invalidated its
    /// source, which told it, and its Unix path is gone.
    @Test func aListenerWhoseLoopEndedReadsInvalid() async throws {
        let path = temporaryUnixPath("lifecycle-ended")
        let thread = LoopThread(name: "listener-lifecycle")
        let listener = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
        thread.loop.add(listener, forMode: .default)
        #expect(listener.isValid)
        thread.stop()
        #expect(waitUntil { !listener.isValid })
        #expect(access(path, F_OK) != 0)
    }

    /// A listener lets go of its Unix path once: invalidated, then released after another listener
    /// bound the same path, it leaves that listener's path alone; `isValid` is false as soon as
    /// `invalidate()` returns, on any thread.
    @Test func aListenerLetsGoOfItsPathOnce() throws {
        let path = temporaryUnixPath("lifecycle-once")
        weak var released: LoopListener?
        let second: LoopListener
        do {
            let first = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
            released = first
            onFreshThread { first.invalidate() }
            #expect(!first.isValid)
            #expect(access(path, F_OK) != 0)
            second = try LoopListener(address: SocketAddress(unixPath: path)) { _ in }
        }
        // The other thread's closure may hold the listener a moment after it returned.
        #expect(waitUntil { released == nil })
        #expect(access(path, F_OK) == 0)
        #expect(second.isValid)
        second.invalidate()
        #expect(access(path, F_OK) != 0)
    }

    /// Nothing goes back to open, and a finished item stays finished.
    @Test func theLifecycleCheckRefusesEveryStepNotInTheTable() {
        expectTheCheckAllowsExactly(Self.lifecycleRows.map { ($0.from, $0.to) })
        #expect(!Lifecycle.mayChange(.invalidated, to: .open))
        #expect(!Lifecycle.mayChange(.finished, to: .invalidated))
    }
}
