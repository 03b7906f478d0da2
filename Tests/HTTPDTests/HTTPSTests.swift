import Foundation
import Glibc
import Testing

/// runloop-httpd with `--tls-cert` and `--tls-key`, against curl, with a certificate made for the
/// run by the `openssl` command line.
@Suite("runloop-httpd over HTTPS", .timeLimit(.minutes(1)))
struct HTTPSTests {
    /// A self-signed certificate for localhost and its key, in a directory of their own.
    static let certificate: (chain: String, key: String) = {
        let directory = NSTemporaryDirectory() + "runloop-httpd-tls-\(getpid())"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let chain = directory + "/cert.pem"
        let key = directory + "/key.pem"
        let status = run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                "-out", chain, "-days", "30", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
            ]
        ).status
        precondition(status == 0, "openssl could not make the test certificate (status \(status))")
        return (chain, key)
    }()

    /// Runs `tool` and returns its exit status and its standard output and error together.
    static func run(_ tool: String, _ arguments: [String]) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        do { try process.run() } catch { return (-1, "\(error)") }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("curl gets answers over HTTPS, ALPN http/1.1, on one kept-alive connection")
    func curlOverHTTPS() async throws {
        try await onOwnThread {
            let (chain, key) = HTTPSTests.certificate
            let server = try ServerProcess(["--threads", "2", "--tls-cert", chain, "--tls-key", key])
            let base = "https://localhost:\(server.port)"
            let (status, output) = HTTPSTests.run(
                "/usr/bin/curl",
                [
                    "-sv", "--cacert", chain, "--resolve", "localhost:\(server.port):127.0.0.1", base + "/",
                    base + "/health",
                ])
            #expect(status == 0, "\(output)")
            #expect(output.contains("ALPN: server accepted http/1.1"), "\(output)")
            #expect(output.components(separatedBy: "< HTTP/1.1 200 OK").count == 3, "\(output)")
            #expect(output.contains("Hello, World!"), "\(output)")
            #expect(output.contains("Re-using existing connection"), "\(output)")
            // Plaintext HTTP to the HTTPS port gets no HTTP answer.
            let plain = HTTPSTests.run("/usr/bin/curl", ["-s", "-m", "5", "http://127.0.0.1:\(server.port)/"])
            #expect(plain.status != 0)
            #expect(!plain.output.contains("Hello"))
            #expect(try server.stop() == 0)
        }
    }

    @Test("--tls-cert without --tls-key, or a missing file, stops the server with a message")
    func badTLSOptions() async throws {
        try await onOwnThread {
            let binary = try ServerProcess.binaryPath()
            let alone = HTTPSTests.run(binary, ["--port", "0", "--tls-cert", HTTPSTests.certificate.chain])
            #expect(alone.status != 0)
            #expect(alone.output.contains("--tls-cert and --tls-key go together"), "\(alone.output)")
            let missing = HTTPSTests.run(binary, ["--port", "0", "--tls-cert", "/nonexistent.pem", "--tls-key", "/x"])
            #expect(missing.status == 1)
            #expect(missing.output.contains("/nonexistent.pem"), "\(missing.output)")
        }
    }
}
