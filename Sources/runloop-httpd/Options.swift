import Glibc
import RunLoopKit

/// Command-line options of runloop-httpd.
struct ServerOptions: Sendable {
    /// IPv4 address to listen on.
    var host = "127.0.0.1"
    /// TCP port; 0 asks the kernel for a free one (printed on startup).
    var port = 8080
    /// Event-loop threads, each with its own listening socket (SO_REUSEPORT).
    var threads = ServerOptions.cores
    /// A connection with no traffic for this long is closed.
    var idleTimeout: Duration = .seconds(30)
    /// Connections open at once, all threads together; more are accepted and closed at once.
    var maxConnections = 10_000
    /// HTTPS: the PEM certificate chain and private key (both or neither).
    var tlsCertificate: String?
    var tlsKey: String?

    static var cores: Int { max(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 1) }

    static let usage = """
        usage: runloop-httpd [--port N] [--threads N] [--idle-timeout SECONDS] [--max-connections N] [--host ADDR]
                             [--tls-cert PATH --tls-key PATH]

          --port N                TCP port (default 8080; 0 picks a free port, printed on startup)
          --threads N             event-loop threads, one SO_REUSEPORT listener each (default: cores)
          --idle-timeout SECONDS  close connections idle this long (default 30; fractions allowed)
          --max-connections N     open connections at most; more are accepted and closed (default 10000)
          --host ADDR             IPv4 address to listen on (default 127.0.0.1)
          --tls-cert PATH         serve HTTPS with this PEM certificate chain (ALPN http/1.1; TLS 1.2 and 1.3)
          --tls-key PATH          ... and this PEM private key

        GET / answers "Hello, World!", GET /health answers "OK". SIGINT or SIGTERM: stop accepting,
        finish the responses in flight, exit 0.

        """

    /// Parses `arguments` (without the program name); `--name value` and `--name=value` both work.
    static func parse(_ arguments: [String]) throws(OptionError) -> ServerOptions {
        var options = ServerOptions()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "--help" || argument == "-h" { throw .help }
            var name = argument
            var value: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            guard name.hasPrefix("--") else { throw .invalid("unexpected argument \(argument)") }
            if value == nil { value = rest.popFirst() }
            guard let value else { throw .invalid("\(name) needs a value") }
            switch name {
            case "--port":
                guard let port = Int(value), (0...65535).contains(port) else { throw .invalid("bad --port \(value)") }
                options.port = port
            case "--threads":
                guard let threads = Int(value), (1...1024).contains(threads) else {
                    throw .invalid("bad --threads \(value)")
                }
                options.threads = threads
            case "--idle-timeout":
                guard let seconds = Double(value), seconds > 0, seconds < 1e9 else {
                    throw .invalid("bad --idle-timeout \(value)")
                }
                options.idleTimeout = .nanoseconds(Int64(seconds * 1e9))
            case "--max-connections":
                guard let limit = Int(value), limit > 0 else { throw .invalid("bad --max-connections \(value)") }
                options.maxConnections = limit
            case "--host":
                options.host = value
            case "--tls-cert":
                options.tlsCertificate = value
            case "--tls-key":
                options.tlsKey = value
            default:
                throw .invalid("unknown option \(name)")
            }
        }
        guard (options.tlsCertificate == nil) == (options.tlsKey == nil) else {
            throw .invalid("--tls-cert and --tls-key go together")
        }
        return options
    }
}

enum OptionError: Error {
    case help
    case invalid(String)
}

/// Writes `text` to standard error.
func printError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

extension ServerOptions {
    /// The HTTPS configuration of `--tls-cert` and `--tls-key` (ALPN `http/1.1`), or nil for HTTP.
    func tlsConfiguration() throws(LoopError) -> TLSConfiguration? {
        guard let tlsCertificate, let tlsKey else { return nil }
        var tls = try TLSConfiguration.server(certificateChain: tlsCertificate, privateKey: tlsKey)
        tls.applicationProtocols = ["http/1.1"]
        return tls
    }
}
