import Foundation
import Testing

@testable import RunLoopKit

@Suite struct SocketAddressTests {
    @Test func ipv4AndIPv6AndUnixAddresses() throws {
        let v4 = try SocketAddress(ipv4: "127.0.0.1", port: 8080)
        #expect(v4.description == "127.0.0.1:8080")
        #expect(v4.port == 8080)
        let v6 = try SocketAddress(ipv6: "::1", port: 443)
        #expect(v6.description == "[::1]:443")
        #expect(v6.port == 443)
        let unix = try SocketAddress(unixPath: "/tmp/x.sock")
        #expect(unix.description == "unix:/tmp/x.sock")
        #expect(unix.port == nil)
        #expect(try SocketAddress(ipv4: "10.0.0.1", port: 1) == SocketAddress(ipv4: "10.0.0.1", port: 1))
        #expect(Set([v4, v6, unix, v4]).count == 3)
    }

    @Test func kernelAddressesEqualParsedOnes() throws {
        // A listener's address comes from getsockname, an accepted peer's from accept: the same
        // host and port parsed from text must be equal, hash alike and give the same sockaddr.
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
        defer { listener.invalidate() }
        let port = try #require(listener.localAddress.port)
        let parsed = try SocketAddress(ipv4: "127.0.0.1", port: port)
        #expect(listener.localAddress == parsed)
        #expect(Set([listener.localAddress, parsed]).count == 1)
        #expect(listener.localAddress.description == "127.0.0.1:\(port)")
        parsed.bytes.withUnsafeBytes { raw in
            #expect(raw.count == MemoryLayout<sockaddr_in>.size)
            let internet = raw.loadUnaligned(as: sockaddr_in.self)
            #expect(Int32(internet.sin_family) == AF_INET)
            #expect(UInt16(bigEndian: internet.sin_port) == UInt16(port))
            #expect(internet.sin_addr.s_addr == UInt32(0x7F00_0001).bigEndian)
        }
        let v6 = try SocketAddress(ipv6: "::1", port: port)
        #expect(v6 != parsed)
        #expect(v6.bytes.count == MemoryLayout<sockaddr_in6>.size)
    }

    @Test(arguments: ["300.1.1.1", "abc", "", "127.0.0.1:80", "::1"])
    func malformedIPv4IsALoopError(host: String) {
        #expect(throws: LoopError.self) { try SocketAddress(ipv4: host, port: 80) }
    }

    @Test(arguments: ["::g", "127.0.0.1", "", "1:2:3:4:5:6:7:8:9"])
    func malformedIPv6IsALoopError(host: String) {
        #expect(throws: LoopError.self) { try SocketAddress(ipv6: host, port: 80) }
    }

    @Test(arguments: [-1, 65536, Int.max, Int.min])
    func portsOutOfRangeAreLoopErrors(port: Int) {
        #expect(throws: LoopError.self) { try SocketAddress(ipv4: "127.0.0.1", port: port) }
        #expect(throws: LoopError.self) { try SocketAddress(ipv6: "::1", port: port) }
    }

    @Test func unixPathsTooLongOrEmptyAreLoopErrors() throws {
        let tooLong = "/tmp/" + String(repeating: "x", count: 200)
        let error = #expect(throws: LoopError.self) { try SocketAddress(unixPath: tooLong) }
        #expect(error?.systemError == ENAMETOOLONG)
        #expect(error?.message.contains("limit is 107") == true)
        #expect(throws: LoopError.self) { try SocketAddress(unixPath: "") }
        #expect(throws: LoopError.self) { try SocketAddress(unixPath: "a\0b") }
        // The longest that fits.
        _ = try SocketAddress(unixPath: "/" + String(repeating: "y", count: 106))
    }

    @Test func resolvesLocalhostOffTheLoopThreads() async throws {
        let before = LoopWorkPool.shared.metrics.completed
        let addresses = try await SocketAddress.resolve(host: "localhost", port: 8080)
        // Looked up on the shared pool (other tests may use it too: at least one more).
        #expect(LoopWorkPool.shared.metrics.completed > before)
        #expect(!addresses.isEmpty)
        #expect(addresses.allSatisfy { $0.port == 8080 })
        let numeric = try await SocketAddress.resolve(host: "127.0.0.1", port: 1)
        #expect(numeric == [try SocketAddress(ipv4: "127.0.0.1", port: 1)])
    }

    @Test func resolvingANameThatDoesNotExistIsALoopError() async {
        await #expect(throws: LoopError.self) {
            try await SocketAddress.resolve(host: "no-such-host.invalid", port: 80)
        }
        await #expect(throws: LoopError.self) { try await SocketAddress.resolve(host: "localhost", port: -5) }
    }
}
