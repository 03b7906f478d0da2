import Foundation
import Synchronization
import Testing

@testable import RunLoopKit

/// What an idle connection holds: the state most connections never set is made on first use, and
/// an IPv4 address takes no allocation.
@Suite struct IdleConnectionTests {
    /// Whether `connection` holds state made on first use, read on its loop's thread.
    private func holdsOptionalState(_ connection: LoopConnection, on loop: Loop) async -> Bool {
        await withCheckedContinuation { continuation in
            loop.perform { continuation.resume(returning: connection.holdsOptionalState) }
        }
    }

    @Test func anIdleConnectedPairHoldsNoOptionalState() async throws {
        let server = LoopThread(name: "idle-server")
        let client = LoopThread(name: "idle-client")
        defer {
            client.stop()
            server.stop()
        }
        let accepted = Mutex<LoopConnection?>(nil)
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { connection in
            accepted.withLock { $0 = connection }
        }
        server.loop.add(listener, forMode: .common)
        defer { listener.invalidate() }
        // Connected with a deadline: the connect's completion and timer are let go once connected.
        let connection = try await LoopConnection.connect(
            to: listener.localAddress, on: client.loop, timeout: .seconds(30))
        #expect(await eventually { accepted.withLock { $0 != nil } })
        let peer = try #require(accepted.withLock { $0 })

        #expect(await holdsOptionalState(connection, on: client.loop) == false)
        #expect(await holdsOptionalState(peer, on: server.loop) == false)
        for address in [connection.localAddress, connection.remoteAddress, peer.remoteAddress] {
            guard case .ipv4 = address.storage else {
                Issue.record("\(address) is not stored in place")
                continue
            }
        }
        #expect(connection.remoteAddress == listener.localAddress)
        #expect(peer.remoteAddress == connection.localAddress)

        // Setting what most connections leave alone makes the state, and the setting holds.
        connection.idleTimeout = .seconds(60)
        #expect(await holdsOptionalState(connection, on: client.loop))
        #expect(connection.idleTimeout == .seconds(60))
        #expect(connection.writeWatermarks == LoopConnection.defaultWriteWatermarks)
        connection.abort()
    }
}
