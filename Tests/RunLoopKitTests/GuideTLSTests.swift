import Glibc
import RunLoopKit
import Testing

// Code samples of the DocC article TLSConnections.md
// (Sources/RunLoopKit/RunLoopKit.docc/TLSConnections.md), run: these blocks appear here verbatim
// (indentation aside), each in a function of its own. The certificates are the TLS tests'
// (TestCertificates: a CA, and a server certificate it signed for localhost). scripts/check-doc-
// snippets.py, run by `make docs`, fails when a block of the article is in none of the files its
// table names for it.

/// What this file's snippets print, in order (`print` in Support.swift).
private let printed = printLog()

/// The TLS line-echo server on `server`'s loop, ALPN http/1.1; returns its address.
private func tlsServer(
    on server: LoopThread, certificatePath: String, keyPath: String
) throws -> SocketAddress {
    let address = try SocketAddress(ipv4: "127.0.0.1", port: 0)
    var tls = try TLSConfiguration.server(certificateChain: certificatePath, privateKey: keyPath)
    tls.applicationProtocols = ["http/1.1"]
    let listener = try LoopListener(address: address, tls: tls) { connection in
        // The handshake has succeeded: what is read and written here is plaintext.
        connection.onRead { connection, buffer in
            while let line = buffer.readLine() {
                connection.enqueue(line + [0x0A])
            }
        }
    }
    server.loop.add(listener, forMode: .common)
    return listener.localAddress
}

/// Connects with verification and ALPN, prints the facts, then says hello and half-closes.
private func tlsClient(to address: SocketAddress, on client: LoopThread, caPath: String) async throws {
    var tls = TLSConfiguration.client(serverName: "localhost")  // SNI, and the name verified
    tls.trustRoots = .file(caPath)  // .system (the default) for hosts on the Internet
    tls.applicationProtocols = ["h2", "http/1.1"]
    let connection = try await LoopConnection.connect(to: address, on: client.loop, tls: tls)
    print(connection.tlsVersion ?? "-")  // TLSv1.3
    print(connection.negotiatedProtocol ?? "no ALPN")  // http/1.1: the server's choice
    print(connection.peerCertificateSubject ?? "-")  // O=RunLoopKit Tests,CN=localhost

    try await connection.write(Array("hello\n".utf8))
    connection.shutdownOutput()  // close_notify, then the FIN; reading goes on
    var answer: [UInt8] = []
    while true {
        let bytes = try await connection.read(maxLength: 4096)
        if bytes.isEmpty { break }  // the server's close_notify
        answer += bytes
    }
    print(String(decoding: answer, as: UTF8.self))  // hello
}

/// A client that verifies another name than the certificate's.
private func wrongName(to address: SocketAddress, on client: LoopThread, caPath: String) async throws {
    do {
        var strict = TLSConfiguration.client(serverName: "other.example")
        strict.trustRoots = .file(caPath)
        _ = try await LoopConnection.connect(to: address, on: client.loop, tls: strict)
    } catch let error as LoopError {
        print(error.message)  // ...: certificate verify failed (hostname mismatch)
    }
}

/// A handshake with a listener that never answers.
private func silentPeer(at silentAddress: SocketAddress, on client: LoopThread) async throws {
    var impatient = TLSConfiguration.client(serverName: "localhost")
    impatient.handshakeTimeout = .milliseconds(500)  // a peer that never answers the ClientHello
    do {
        _ = try await LoopConnection.connect(to: silentAddress, on: client.loop, tls: impatient)
    } catch let error as LoopError where error.systemError == ETIMEDOUT {
        print("no handshake within 500 ms")
    }
}

// MARK: Tests

@Suite(.serialized) struct GuideTLSTests {
    let certificates = TestCertificates.shared

    /// The server, the verifying client with ALPN, the facts, the half-close and the wrong name.
    @Test func theChapterServerAndClientTalk() async throws {
        let server = LoopThread(name: "guide-tls-server")
        defer { server.stop() }
        let client = LoopThread(name: "guide-tls-client")
        defer { client.stop() }
        let address = try tlsServer(
            on: server, certificatePath: certificates.serverCertificate, keyPath: certificates.serverKey)
        let start = printed.count
        try await tlsClient(to: address, on: client, caPath: certificates.caCertificate)
        try await wrongName(to: address, on: client, caPath: certificates.caCertificate)
        let lines = Array(printed.events.dropFirst(start))
        #expect(lines.count == 5, "\(lines)")
        guard lines.count == 5 else { return }
        #expect(lines[0] == "TLSv1.3")
        #expect(lines[1] == "http/1.1")
        #expect(lines[2] == "O=RunLoopKit Tests,CN=localhost")
        #expect(lines[3] == "hello\n")
        #expect(lines[4].hasSuffix("certificate verify failed (hostname mismatch)"), "\(lines[4])")
    }

    /// A listener that accepts and never speaks: the handshake ends with ETIMEDOUT after its
    /// timeout, not before it and well before the default 5 s.
    @Test func theHandshakeTimeoutEndsASilentPeer() async throws {
        let silent = LoopThread(name: "guide-tls-silent")
        defer { silent.stop() }
        let client = LoopThread(name: "guide-tls-impatient")
        defer { client.stop() }
        let listener = try LoopListener(address: SocketAddress(ipv4: "127.0.0.1", port: 0)) { _ in }
        silent.loop.add(listener, forMode: .common)
        let start = printed.count
        // On a thread of its own, so that the time measured is the handshake's, not a wait for one
        // of Swift concurrency's threads.
        let address = listener.localAddress
        let took = try await onOwnLoopThread {
            let began = ContinuousClock.now
            try await silentPeer(at: address, on: client)
            return ContinuousClock.now - began
        }
        #expect(Array(printed.events.dropFirst(start)) == ["no handshake within 500 ms"])
        #expect(took >= .milliseconds(450) && took < .seconds(4), "\(took)")
    }
}
