import Synchronization

/// Where a TLS client finds the certificates it trusts.
public enum TLSTrustRoots: Sendable, Hashable {
    /// The system's store (Debian: `/etc/ssl/certs`, through OpenSSL's default paths).
    case system
    /// A PEM file of one or more certificates.
    case file(String)
    /// PEM text of one or more certificates.
    case pem(String)
}

/// How much of the peer's certificate a TLS client checks.
public enum TLSVerification: Sendable, Hashable {
    /// The chain up to a trusted root, the dates, and the name (the `serverName`, or the address
    /// connected to when there is none).
    case fullVerification
    /// The chain and the dates, not the name.
    case noHostnameVerification
    /// Nothing: any certificate, a self-signed one included, is taken. For tests only.
    case none
}

/// The oldest TLS version a configuration accepts.
public enum TLSVersion: Sendable, Hashable {
    // The names of the versions, as TLS spells them.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    /// TLS 1.2 (the default): TLS 1.2 and 1.3.
    case v1_2
    // swift-format-ignore: AlwaysUseLowerCamelCase
    /// TLS 1.3 only.
    case v1_3
}

/// How a listener or a connection speaks TLS (OpenSSL 3): a client's trust and verification, or a
/// server's certificate chain and key, and what both sides share (ALPN, minimum version,
/// handshake timeout).
///
/// A value; `Sendable`, and usable from any thread. Each configuration value makes its OpenSSL
/// context once, when a listener or a connection first uses it, and its copies share that context;
/// changing a property makes the next use build a new one. Renegotiation is refused, TLS below
/// 1.2 is never spoken, and a failed handshake never falls back to plaintext. A server's private
/// key is held as OpenSSL's parsed key from the moment ``server(certificateChain:privateKey:)``
/// reads it, and appears in no error or description.
public struct TLSConfiguration: Sendable {
    /// The certificates a client trusts: `.system` by default. Ignored by servers.
    public var trustRoots: TLSTrustRoots = .system {
        didSet { cache = ContextCache() }
    }
    /// What a client checks of the server's certificate: `.fullVerification` by default. Servers
    /// do not ask for client certificates.
    public var certificateVerification: TLSVerification = .fullVerification {
        didSet { cache = ContextCache() }
    }
    /// ALPN, in order of preference, e.g. `["h2", "http/1.1"]`; empty (the default) for none. A
    /// server picks the first of its own that the client offers, and answers without ALPN when
    /// there is none. Each name needs 1 to 255 bytes (a programmer error otherwise).
    public var applicationProtocols: [String] = [] {
        didSet { cache = ContextCache() }
    }
    /// The oldest version accepted: `.v1_2` by default.
    public var minimumVersion: TLSVersion = .v1_2 {
        didSet { cache = ContextCache() }
    }
    /// How long the handshake may take, from the TCP connection on, before the connection is
    /// closed with a `LoopError` (`systemError` `ETIMEDOUT`): 5 seconds by default. Must be
    /// positive (a programmer error otherwise, when the configuration is used).
    public var handshakeTimeout: Duration = .seconds(5)
    /// A client's server name: sent as SNI when it is a DNS name, and verified against the
    /// certificate with `.fullVerification` (the address connected to is verified when it is nil).
    /// Set per connection: changing it keeps the configuration's context.
    public var serverName: String?

    /// A server's chain and key; nil for a client.
    let credentials: OpenSSLCredentials?
    private var cache = ContextCache()

    private init(serverName: String?, credentials: OpenSSLCredentials?) {
        self.serverName = serverName
        self.credentials = credentials
    }

    /// A client configuration: the system's trust roots, full verification of the server's
    /// certificate against `serverName` (or, when it is nil, the address connected to), SNI.
    ///
    /// Any thread.
    public static func client(serverName: String? = nil) -> TLSConfiguration {
        TLSConfiguration(serverName: serverName, credentials: nil)
    }

    /// A server configuration with the PEM certificate chain at `certificateChain` (the server's
    /// certificate first, then intermediates) and the PEM private key at `privateKey`, both read
    /// now.
    ///
    /// Any thread. Throws a `LoopError` when a file is missing or unreadable (`systemError` is its
    /// errno), holds no PEM certificate or key, the key is protected by a passphrase, or does not
    /// fit the certificate; the message names the file, never the key's contents.
    public static func server(certificateChain: String, privateKey: String) throws(LoopError) -> TLSConfiguration {
        let credentials = try OpenSSLCredentials(certificateChain: certificateChain, privateKey: privateKey)
        let configuration = TLSConfiguration(serverName: nil, credentials: credentials)
        // The key and the chain are checked against each other now, not at the first connection.
        _ = try configuration.context()
        return configuration
    }

    /// Whether this is a server configuration.
    var isServer: Bool { credentials != nil }

    /// The OpenSSL context of this configuration: made at the first call, then shared by every
    /// copy.
    func context() throws(LoopError) -> OpenSSLContext {
        precondition(
            handshakeTimeout > .zero,
            "RunLoopKit: TLSConfiguration.handshakeTimeout must be positive, not \(handshakeTimeout)")
        return try cache.context(for: self)
    }
}

/// A configuration's OpenSSL context, made once under a lock and shared by the configuration's
/// copies.
final class ContextCache: Sendable {
    private let made = Mutex<OpenSSLContext?>(nil)

    func context(for configuration: TLSConfiguration) throws(LoopError) -> OpenSSLContext {
        try made.withLock { (made: inout OpenSSLContext?) throws(LoopError) -> OpenSSLContext in
            if let made { return made }
            let context = try OpenSSLContext(configuration)
            made = context
            return context
        }
    }
}
