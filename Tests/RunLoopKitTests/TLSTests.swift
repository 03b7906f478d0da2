import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Certificates made at test time by the `openssl` command line, once per run: a CA, a server
/// certificate it signed for `localhost` and 127.0.0.1, an expired one, one for another host, and
/// a self-signed one. EC P-256 keys.
struct TestCertificates: Sendable {
    let directory: String
    var caCertificate: String { directory + "/ca.pem" }
    var serverCertificate: String { directory + "/server.pem" }
    var serverKey: String { directory + "/server.key" }
    var expiredCertificate: String { directory + "/expired.pem" }
    var otherHostCertificate: String { directory + "/other.pem" }
    var selfSignedCertificate: String { directory + "/self.pem" }
    var selfSignedKey: String { directory + "/self.key" }

    static let shared: TestCertificates = {
        let directory = NSTemporaryDirectory() + "runloopkit-tls-\(getpid())"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let script = """
            set -e
            cd "$1"
            key() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1" -out "$2" -subj "$3" 2>/dev/null; }
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
                -days 30 -subj "/CN=RunLoopKit Test CA" 2>/dev/null
            key server.key server.csr "/CN=localhost/O=RunLoopKit Tests"
            printf "subjectAltName=DNS:localhost,IP:127.0.0.1\\n" > local.ext
            printf "subjectAltName=DNS:other.example\\n" > other.ext
            sign() { openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1" -days "$2" -extfile "$3" 2>/dev/null; }
            sign server.pem 30 local.ext
            sign expired.pem -1 local.ext
            sign other.pem 30 other.ext
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout self.key -out self.pem \
                -days 30 -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
            """
        let status = runTool("/bin/sh", ["-c", script, "sh", directory]).status
        precondition(status == 0, "openssl could not make the test certificates (status \(status))")
        return TestCertificates(directory: directory)
    }()

    /// A server configuration with `certificate` (default: the CA-signed one) and the server key.
    func server(_ certificate: String? = nil, key: String? = nil) throws -> TLSConfiguration {
        try TLSConfiguration.server(certificateChain: certificate ?? serverCertificate, privateKey: key ?? serverKey)
    }

    /// A client configuration that trusts the test CA.
    func client(serverName: String? = "localhost") -> TLSConfiguration {
        var configuration = TLSConfiguration.client(serverName: serverName)
        configuration.trustRoots = .file(caCertificate)
        return configuration
    }
}

/// Runs `tool` with `arguments`, `input` on its standard input; returns its exit status and its
/// standard output and error, together.
@discardableResult
func runTool(_ tool: String, _ arguments: [String], input: String = "") -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    let output = Pipe()
    let stdin = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = stdin
    do { try process.run() } catch { return (-1, "\(error)") }
    stdin.fileHandleForWriting.write(Data(input.utf8))
    try? stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// `openssl s_server` on a free loopback port, serving until stopped.
final class OpenSSLServer: @unchecked Sendable {
    // @unchecked: set in init, then only read (and terminated once).
    let process = Process()
    let port: Int

    init(_ arguments: [String]) throws {
        // A port the kernel just gave out and took back: nothing else here binds ports at random.
        let probe = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
        port = probe.localAddress.port ?? 0
        probe.invalidate()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-naccept", "1"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = Pipe()
        try process.run()
        // s_server prints ACCEPT once it listens.
        var seen = ""
        while !seen.contains("ACCEPT") {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { throw LoopError("openssl s_server exited: \(seen)") }
            seen += String(decoding: data, as: UTF8.self)
        }
    }

    var address: SocketAddress { try! SocketAddress(ipv4: "127.0.0.1", port: port) }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

extension EchoServer {
    /// A TLS echo server; `accepted` records each connection's ALPN protocol ("-" for none) once
    /// its handshake has succeeded.
    convenience init(
        _ tls: TLSConfiguration, accepted: Recorder<String> = Recorder(),
        configure: @escaping @Sendable (LoopConnection) -> Void = { _ in }
    ) throws {
        try self.init(tls: tls) { connection in
            accepted.append(connection.negotiatedProtocol ?? "-")
            configure(connection)
        }
    }

    var port: Int { address.port ?? 0 }
}

/// TLS on OpenSSL: a RunLoopKit listener against `openssl s_client` and Python's `ssl`, a
/// RunLoopKit client against `openssl s_server`, each handshake failure with OpenSSL's reason,
/// and bulk data byte for byte.
@Suite struct TLSTests {
    let certificates = TestCertificates.shared

    // MARK: Peers the library did not write

    @Test func pythonSSLTalksToATLSListener() throws {
        var tls = try certificates.server()
        tls.applicationProtocols = ["h2", "http/1.1"]
        let accepted = Recorder<String>()
        let server = try EchoServer(tls, accepted: accepted) { connection in
            connection.onRead { connection, buffer in
                connection.write(&buffer)
                connection.close()
            }
        }
        defer { server.stop() }
        let (output, _) = try runPython(
            """
            import socket, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2])
            context.set_alpn_protocols(["http/1.1"])
            s = context.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))),
                                    server_hostname="localhost", suppress_ragged_eofs=False)
            s.sendall(b"hello over tls")
            data = s.makefile("rb").read()   # ends only at close_notify: a bare FIN raises SSLEOFError
            print(data.decode(), s.version(), s.selected_alpn_protocol())
            """, [String(server.port), certificates.caCertificate])
        #expect(output == "hello over tls TLSv1.3 http/1.1\n")
        #expect(accepted.events == ["http/1.1"])
    }

    @Test func openSSLSClientTalksToATLSListener() throws {
        // Echoes the first read, then closes: s_client (which ignores the end of its input) ends
        // at the server's close_notify and FIN.
        let server = try EchoServer(try certificates.server()) { connection in
            connection.onRead { connection, buffer in
                connection.write(&buffer)
                connection.close()
            }
        }
        defer { server.stop() }
        let (status, output) = runTool(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(server.port)", "-CAfile", certificates.caCertificate,
                "-verify_return_error", "-verify_hostname", "localhost", "-servername", "localhost", "-tls1_2",
                "-ign_eof",
            ], input: "ping\n")
        #expect(status == 0, "\(output)")
        #expect(output.contains("Verify return code: 0 (ok)"), "\(output)")
        #expect(output.contains("Protocol  : TLSv1.2"), "\(output)")
        #expect(output.contains("\nping\n"), "the echo did not come back: \(output)")
    }

    @Test func aClientTalksToOpenSSLSServer() async throws {
        let server = try OpenSSLServer([
            "-cert", certificates.serverCertificate, "-key", certificates.serverKey, "-alpn", "http/1.1", "-rev",
        ])
        defer { server.stop() }
        let thread = LoopThread(name: "tls-client")
        defer { thread.stop() }
        var tls = certificates.client()
        tls.applicationProtocols = ["http/1.1"]
        let connection = try await LoopConnection.connect(to: server.address, on: thread.loop, tls: tls)
        #expect(connection.isTLS)
        #expect(connection.negotiatedProtocol == "http/1.1")
        #expect(connection.peerCertificateSubject == "O=RunLoopKit Tests,CN=localhost")
        #expect(connection.tlsVersion == "TLSv1.3")
        try await connection.write(Array("hello\n".utf8))
        var answer: [UInt8] = []
        while !answer.contains(UInt8(ascii: "\n")) {
            let chunk = try await connection.read(maxLength: 1024)
            if chunk.isEmpty { break }
            answer += chunk
        }
        #expect(String(decoding: answer, as: UTF8.self) == "olleh\n")
        connection.close()
    }

    @Test func theCompletionFormConnectsToo() throws {
        let server = try EchoServer(try certificates.server())
        defer { server.stop() }
        let thread = LoopThread(name: "tls-client")
        defer { thread.stop() }
        let outcome = Recorder<String>()
        LoopConnection.connect(to: server.address, on: thread.loop, tls: certificates.client()) { result in
            switch result {
            case .success(let connection):
                connection.onRead { connection, buffer in
                    outcome.append(String(decoding: buffer.read(maxLength: 100), as: UTF8.self))
                    connection.close()
                }
                connection.enqueue(Array("over tls".utf8))
            case .failure(let error):
                outcome.append("failed: \(error)")
            }
        }
        #expect(waitUntil { !outcome.events.isEmpty })
        #expect(outcome.events == ["over tls"])
    }

    // MARK: Failures

    /// Connects a RunLoopKit client to `address` with `tls`; the error it throws.
    static func handshakeError(_ address: SocketAddress, _ tls: TLSConfiguration) async -> LoopError? {
        let thread = LoopThread(name: "tls-client")
        defer { thread.stop() }
        do {
            let connection = try await LoopConnection.connect(to: address, on: thread.loop, tls: tls)
            connection.abort()
            return nil
        } catch {
            return error as? LoopError
        }
    }

    @Test func anUnknownCAIsRefused() async throws {
        let accepted = Recorder<String>()
        let server = try EchoServer(try certificates.server(), accepted: accepted)
        defer { server.stop() }
        // The system's roots do not hold the test CA.
        let error = await Self.handshakeError(server.address, .client(serverName: "localhost"))
        #expect(
            error?.message.contains("certificate verify failed (unable to get local issuer certificate)") == true,
            "\(String(describing: error))")
        #expect(accepted.events.isEmpty)
    }

    @Test func aSelfSignedCertificateIsRefusedByDefault() async throws {
        let server = try EchoServer(
            try certificates.server(certificates.selfSignedCertificate, key: certificates.selfSignedKey))
        defer { server.stop() }
        let error = await Self.handshakeError(server.address, .client(serverName: "localhost"))
        #expect(error?.message.contains("self-signed certificate") == true, "\(String(describing: error))")
        // Verification .none takes it (tests only).
        var lax = TLSConfiguration.client(serverName: "localhost")
        lax.certificateVerification = .none
        #expect(await Self.handshakeError(server.address, lax) == nil)
    }

    @Test func aCertificateForAnotherHostIsRefused() async throws {
        let server = try EchoServer(try certificates.server(certificates.otherHostCertificate))
        defer { server.stop() }
        let error = await Self.handshakeError(server.address, certificates.client())
        #expect(
            error?.message.contains("certificate verify failed (hostname mismatch)") == true,
            "\(String(describing: error))")
        // Without a server name, the address connected to (127.0.0.1) is what must match.
        let byAddress = await Self.handshakeError(server.address, certificates.client(serverName: nil))
        #expect(byAddress?.message.contains("IP address mismatch") == true, "\(String(describing: byAddress))")
        var unchecked = certificates.client()
        unchecked.certificateVerification = .noHostnameVerification
        #expect(await Self.handshakeError(server.address, unchecked) == nil)
    }

    @Test func anExpiredCertificateIsRefused() async throws {
        let server = try EchoServer(try certificates.server(certificates.expiredCertificate))
        defer { server.stop() }
        let error = await Self.handshakeError(server.address, certificates.client())
        #expect(error?.message.contains("certificate has expired") == true, "\(String(describing: error))")
    }

    @Test func anOldProtocolVersionIsRefused() async throws {
        let server = try OpenSSLServer([
            "-cert", certificates.serverCertificate, "-key", certificates.serverKey, "-tls1_2",
        ])
        defer { server.stop() }
        var tls = certificates.client()
        tls.minimumVersion = .v1_3
        let error = await Self.handshakeError(server.address, tls)
        #expect(error?.message.contains("protocol version") == true, "\(String(describing: error))")
    }

    @Test func aListenerRefusesTLSBelow1_2AndPlaintext() async throws {
        let accepted = Recorder<String>()
        let server = try EchoServer(try certificates.server(), accepted: accepted)
        defer { server.stop() }
        let (output, _) = try runPython(
            """
            import socket, ssl, sys
            port = int(sys.argv[1])
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            try:
                context.minimum_version = ssl.TLSVersion.TLSv1_1
                context.maximum_version = ssl.TLSVersion.TLSv1_1
                context.set_ciphers("ALL:@SECLEVEL=0")
                context.wrap_socket(socket.create_connection(("127.0.0.1", port)))
                print("tls 1.1 accepted")
            except (ssl.SSLError, OSError) as error:
                print("tls 1.1 refused")
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            s.settimeout(10)
            data = s.recv(65536)
            print("plaintext answered with", len(data), "bytes" if data[:1] == b"\\x15" or not data else "plaintext")
            """, [String(server.port)])
        #expect(
            output == "tls 1.1 refused\nplaintext answered with 7 bytes\n"
                || output.hasPrefix("tls 1.1 refused\nplaintext answered with"),
            "\(output)")
        #expect(!output.contains("accepted"))
        #expect(!output.contains("plaintext\n"))
        #expect(accepted.events.isEmpty)
    }

    @Test func renegotiationIsRefused() throws {
        // Refused, the renegotiation leaves the connection idle: the server's idle timeout ends it,
        // and s_client with it.
        let server = try EchoServer(try certificates.server()) { connection in
            connection.idleTimeout = .milliseconds(500)
        }
        defer { server.stop() }
        // s_client's "R" asks for a renegotiation (TLS 1.2); its input stays open meanwhile (it
        // would end the session at the end of its input, and takes no commands with -ign_eof).
        let (_, output) = runTool(
            "/bin/sh",
            [
                "-c", "(echo R; sleep 3) | openssl s_client -connect 127.0.0.1:$0 -CAfile $1 -tls1_2",
                String(server.port), certificates.caCertificate,
            ])
        #expect(output.contains("RENEGOTIATING"), "\(output)")
        #expect(output.contains("no renegotiation"), "\(output)")
    }

    @Test func noSharedCipherIsRefused() async throws {
        // An EC key, and only RSA key exchange allowed: the server has nothing to offer.
        let server = try OpenSSLServer([
            "-cert", certificates.serverCertificate, "-key", certificates.serverKey, "-tls1_2",
            "-cipher", "ECDHE-RSA-AES128-GCM-SHA256",
        ])
        defer { server.stop() }
        let error = await Self.handshakeError(server.address, certificates.client())
        #expect(error?.message.contains("handshake failure") == true, "\(String(describing: error))")
    }

    @Test func aStalledHandshakeIsCutByItsTimeout() async throws {
        // Timed on a loop thread of its own: tests that block hold the shared task threads.
        let certificates = self.certificates
        try await onOwnLoopThread { try await Self.stalledHandshakes(certificates) }
    }

    private static func stalledHandshakes(_ certificates: TestCertificates) async throws {
        // A client against a TCP peer that never answers.
        let silent = try SilentServer()
        defer { silent.stop() }
        var tls = certificates.client()
        tls.handshakeTimeout = .milliseconds(300)
        let start = ContinuousClock.now
        let error = await Self.handshakeError(silent.address, tls)
        #expect(error?.systemError == ETIMEDOUT, "\(String(describing: error))")
        #expect(milliseconds(since: start) < 3_000)

        // A listener against a client that connects and says nothing.
        var serverTLS = try certificates.server()
        serverTLS.handshakeTimeout = .milliseconds(300)
        let accepted = Recorder<String>()
        let server = try EchoServer(serverTLS, accepted: accepted)
        defer { server.stop() }
        let (output, _) = try runPython(
            """
            import socket, sys, time
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.settimeout(10)
            start = time.monotonic()
            data = s.recv(100)
            print(len(data), time.monotonic() - start < 3)
            """, [String(server.port)])
        #expect(output == "0 True\n")
        #expect(accepted.events.isEmpty)
    }

    @Test func cancellingAConnectWhileItHandshakesThrowsCancellationError() async throws {
        // On a loop thread of its own, so the 50 ms pause is not stretched by tests that block the
        // shared task threads; the handshake timeout is far away, so only the cancel can end it.
        let certificates = self.certificates
        try await onOwnLoopThread { try await Self.cancelledHandshake(certificates) }
    }

    private static func cancelledHandshake(_ certificates: TestCertificates) async throws {
        let silent = try SilentServer()
        defer { silent.stop() }
        let thread = LoopThread(name: "tls-client")
        defer { thread.stop() }
        let address = silent.address
        var tls = certificates.client()
        tls.handshakeTimeout = .seconds(60)
        let task = Task(executorPreference: thread.loop) {
            try await LoopConnection.connect(to: address, on: thread.loop, tls: tls)
        }
        let peer = try await silent.firstConnection()
        try await Task.sleep(for: .milliseconds(50))  // the ClientHello is out; the server is silent
        task.cancel()
        let outcome = await task.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        let closed = Recorder<LoopError?>()
        peer.recordClosed(in: closed)
        #expect(await eventually { !closed.events.isEmpty }, "the cancelled attempt did not close its socket")
    }

    @Test func missingPEMFilesThrow() throws {
        #expect(throws: LoopError.self) {
            try TLSConfiguration.server(certificateChain: "/nonexistent/chain.pem", privateKey: certificates.serverKey)
        }
        do {
            _ = try TLSConfiguration.server(
                certificateChain: certificates.serverCertificate, privateKey: "/nonexistent/key")
            Issue.record("a missing key was taken")
        } catch {
            #expect(error.systemError == ENOENT)
            #expect(error.message.contains("/nonexistent/key"))
        }
        // A key that does not fit the certificate; the message never shows the key.
        let keyText = try String(contentsOfFile: certificates.selfSignedKey, encoding: .utf8)
        do {
            _ = try TLSConfiguration.server(
                certificateChain: certificates.serverCertificate, privateKey: certificates.selfSignedKey)
            Issue.record("a key that does not fit was taken")
        } catch {
            #expect(error.message.contains("does not fit"), "\(error)")
            let body = keyText.split(separator: "\n").dropFirst().first.map(String.init) ?? "?"
            #expect(!error.message.contains(body))
        }
    }

    // MARK: Bulk, half-close

    /// 256 MiB (32 MiB in debug builds, which encrypt at a tenth of the speed) through a TLS echo,
    /// client and server both RunLoopKit, compared byte for byte.
    @Test func bulkDataThroughATLSEchoArrivesByteForByte() async throws {
        #if DEBUG
            let total = 32 << 20
        #else
            let total = 256 << 20
        #endif
        let server = try EchoServer(try certificates.server())
        defer { server.stop() }
        let thread = LoopThread(name: "tls-bulk")
        defer { thread.stop() }
        let connection = try await LoopConnection.connect(
            to: server.address, on: thread.loop, tls: certificates.client())
        // A pattern that repeats only every 251 bytes, so a lost or repeated block shows.
        let chunk = (0..<(1 << 20)).map { UInt8($0 % 251) }
        let reader = Task {
            var received = 0
            var mismatches = 0
            while received < total {
                let bytes = try await connection.read(maxLength: 1 << 20)
                if bytes.isEmpty { break }
                for (offset, byte) in bytes.enumerated() where byte != UInt8((received + offset) % (1 << 20) % 251) {
                    mismatches += 1
                }
                received += bytes.count
            }
            return (received, mismatches)
        }
        for _ in 0..<(total >> 20) { try await connection.write(chunk) }
        let (received, mismatches) = try await reader.value
        #expect(received == total)
        #expect(mismatches == 0)
        connection.close()
    }

    /// `shutdownOutput()` sends close_notify, then the FIN: the peer reads every byte, then a
    /// clean end (Python's `recv` gives `b""` only after close_notify), and can still answer.
    @Test func halfCloseSendsCloseNotifyThenFIN() throws {
        let server = try EchoServer(try certificates.server()) { connection in
            connection.allowsHalfClosure = true
            connection.onRead { _, _ in }
            connection.enqueue(Array(repeating: UInt8(ascii: "z"), count: 100_000))
            connection.shutdownOutput()
        }
        defer { server.stop() }
        let (output, _) = try runPython(
            """
            import socket, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2])
            raw = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s = context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)
            data = s.makefile("rb").read()
            print(len(data))
            """, [String(server.port), certificates.caCertificate])
        #expect(output == "100000\n")
    }

    /// A peer that resets the connection after the handshake: the server's read fails with
    /// `ECONNRESET` (the socket's read through OpenSSL reports the errno as a plaintext read does),
    /// and what arrived before the reset was delivered.
    @Test func aResetAfterTheHandshakeClosesWithECONNRESET() throws {
        let closed = Recorder<LoopError?>()
        let received = Recorder<Int>()
        let server = try EchoServer(try certificates.server()) { connection in
            connection.onRead { _, buffer in received.append(buffer.read(maxLength: buffer.count).count) }
            connection.recordClosed(in: closed)
        }
        defer { server.stop() }
        _ = try runPython(
            """
            import socket, ssl, struct, sys, time
            context = ssl.create_default_context(cafile=sys.argv[2])
            raw = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s = context.wrap_socket(raw, server_hostname="localhost")
            s.sendall(b"before the reset")
            time.sleep(0.2)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # no close_notify: an RST
            """, [String(server.port), certificates.caCertificate])
        #expect(waitUntil { !closed.events.isEmpty })
        #expect(closed.events.first??.systemError == ECONNRESET, "\(closed.events)")
        #expect(received.events.reduce(0, +) == "before the reset".utf8.count)
    }
}
