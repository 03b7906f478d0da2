extension LoopListener {
    /// A listener whose connections speak TLS as `tls` (a server configuration) says: binds now,
    /// as the plaintext listener does, and hands each connection to `accept` once its handshake
    /// has succeeded. A failed handshake (the client's protocol version, no shared cipher, an
    /// alert) or one that takes longer than `tls.handshakeTimeout` closes the socket without
    /// reaching `accept`.
    ///
    /// Any thread; `accept` runs on the loop's thread, in the listener's modes. Throws as the
    /// plaintext listener does, and a `LoopError` with OpenSSL's reason when the configuration's
    /// context cannot be made. A client configuration is a programmer error.
    public convenience init(
        address: SocketAddress, tls: TLSConfiguration, backlog: Int = 1024, reusePort: Bool = false,
        _ accept: sending @escaping (LoopConnection) -> Void
    ) throws(LoopError) {
        let start = try TLSStart(tls, server: true)
        // Each accepted connection starts its handshake first, and reaches `accept` once it has
        // succeeded.
        let handshaking = { (connection: LoopConnection) in
            connection.startTLS(start) { if case .success = $0 { accept(connection) } }
        }
        try self.init(address: address, backlog: backlog, reusePort: reusePort, handshaking)
    }
}
