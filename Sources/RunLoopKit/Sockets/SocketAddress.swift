import Glibc

/// The address of a socket: an IPv4 or IPv6 host and port, or a Unix-domain socket path.
///
/// A value; any thread.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 address in place, in one word with no allocation (a server holds two addresses per
    /// connection, most of them IPv4); any other as its `sockaddr_in6` or `sockaddr_un` bytes, as
    /// long as the family needs. Every IPv4 address is stored in place, so equal addresses have
    /// equal storage.
    enum Storage: Hashable, Sendable {
        /// `sin_addr` and `sin_port` as the `sockaddr_in` holds them (network byte order).
        case ipv4(address: UInt32, port: UInt16)
        case bytes([UInt8])
    }

    let storage: Storage

    /// The `sockaddr` bytes, as long as the family needs.
    var bytes: Bytes { Bytes(storage: storage) }

    /// The bytes of a `SocketAddress`'s `sockaddr`, made on the stack for an IPv4 address.
    struct Bytes {
        let storage: Storage

        var count: Int {
            switch storage {
            case .ipv4: MemoryLayout<sockaddr_in>.size
            case .bytes(let bytes): bytes.count
            }
        }

        subscript(offset: Int) -> UInt8 {
            withUnsafeBytes { $0[offset] }
        }

        func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
            switch storage {
            case .ipv4(let address, let port):
                var internet = sockaddr_in()
                internet.sin_family = sa_family_t(AF_INET)
                internet.sin_port = port
                internet.sin_addr.s_addr = address
                return Swift.withUnsafeBytes(of: &internet, body)
            case .bytes(let bytes):
                return bytes.withUnsafeBytes(body)
            }
        }
    }

    /// The address whose `sockaddr` is `raw` (as long as its family needs), IPv4 in place.
    private init(sockaddr raw: UnsafeRawBufferPointer) {
        if raw.count >= MemoryLayout<sockaddr_in>.size,
            Int32(raw.loadUnaligned(fromByteOffset: 0, as: sa_family_t.self)) == AF_INET
        {
            let internet = raw.loadUnaligned(as: sockaddr_in.self)
            storage = .ipv4(address: internet.sin_addr.s_addr, port: internet.sin_port)
        } else {
            storage = .bytes(Array(raw))
        }
    }

    /// An IPv4 address in dotted form (`"127.0.0.1"`) and a port in 0...65535 (0: any free port,
    /// for a listener).
    ///
    /// Any thread. Throws a `LoopError` for a malformed address or a port out of range.
    public init(ipv4 host: String, port: Int) throws(LoopError) {
        self = try SocketAddress.internet(
            sockaddr_in(), AF_INET, host: host, port: port,
            name: "IPv4 address (expected dotted form such as 127.0.0.1)",
            \.sin_addr, \.sin_family, \.sin_port)
    }

    /// An IPv6 address in textual form (`"::1"`) and a port in 0...65535.
    ///
    /// Any thread. Throws a `LoopError` for a malformed address or a port out of range.
    public init(ipv6 host: String, port: Int) throws(LoopError) {
        self = try SocketAddress.internet(
            sockaddr_in6(), AF_INET6, host: host, port: port, name: "IPv6 address (expected a form such as ::1)",
            \.sin6_addr, \.sin6_family, \.sin6_port)
    }

    /// The address of a `sockaddr_in` or `sockaddr_in6` for `host` (parsed with `inet_pton`) and `port`.
    private static func internet<Address>(
        _ empty: Address, _ family: Int32, host: String, port: Int, name: String,
        _ hostField: PartialKeyPath<Address>, _ familyField: WritableKeyPath<Address, sa_family_t>,
        _ portField: WritableKeyPath<Address, in_port_t>
    ) throws(LoopError) -> SocketAddress {
        try checkPort(port)
        var address = empty
        let offset = MemoryLayout<Address>.offset(of: hostField)!
        let parsed = withUnsafeMutableBytes(of: &address) {
            Platform.parseInternetAddress(host, family: family, into: $0.baseAddress! + offset)
        }
        guard parsed else {
            throw LoopError("\"\(host)\" is not an \(name)")
        }
        address[keyPath: familyField] = sa_family_t(family)
        address[keyPath: portField] = UInt16(port).bigEndian
        return withUnsafeBytes(of: address) { SocketAddress(sockaddr: $0) }
    }

    /// A Unix-domain stream socket's path in the file system.
    ///
    /// Any thread. Throws a `LoopError` for an empty path, a path with a NUL byte, or one longer
    /// than the kernel's limit (107 bytes).
    public init(unixPath path: String) throws(LoopError) {
        let utf8 = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        guard !utf8.isEmpty, !utf8.contains(0) else {
            throw LoopError("a Unix socket path must be non-empty and contain no NUL byte")
        }
        guard utf8.count < capacity else {
            throw LoopError(
                "the Unix socket path is \(utf8.count) bytes long; the limit is \(capacity - 1): \(path)",
                systemError: ENAMETOOLONG)
        }
        self.init(unixPathBytes: utf8)
    }

    /// An unnamed Unix socket's address (as each end of a socket pair has).
    static var unnamedUnix: SocketAddress { SocketAddress(unixPathBytes: []) }

    private init(unixPathBytes path: [UInt8]) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let header = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        storage = .bytes(withUnsafeBytes(of: address) { Array($0.prefix(header)) } + path + [0])
    }

    /// The address in `storage`, as the kernel filled it in (`accept`, `getsockname`).
    init(storage: sockaddr_storage, length: socklen_t) {
        let length = min(Int(length), MemoryLayout<sockaddr_storage>.size)
        guard Int32(storage.ss_family) == AF_UNIX else {
            self = withUnsafeBytes(of: storage) {
                SocketAddress(sockaddr: UnsafeRawBufferPointer(rebasing: $0.prefix(length)))
            }
            return
        }
        var bytes = withUnsafeBytes(of: storage) { Array($0.prefix(length)) }
        // An unnamed socket has no path; a named one may come without its terminating NUL.
        let header = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        if bytes.count <= header { bytes = Array(bytes.prefix(header)) + [0] }
        if let end = bytes[header...].firstIndex(of: 0) { bytes = Array(bytes[..<end]) }
        bytes.append(0)
        self.storage = .bytes(bytes)
    }

    private static func checkPort(_ port: Int) throws(LoopError) {
        guard (0...65535).contains(port) else { throw LoopError("port \(port) is not in 0...65535") }
    }

    /// `AF_INET`, `AF_INET6` or `AF_UNIX`.
    var family: Int32 {
        switch storage {
        case .ipv4: AF_INET
        case .bytes(let bytes): bytes.withUnsafeBytes { Int32($0.load(fromByteOffset: 0, as: sa_family_t.self)) }
        }
    }

    /// Whether this is a TCP address (IPv4 or IPv6).
    var isInternet: Bool { family != AF_UNIX }

    /// The port; nil for a Unix path.
    ///
    /// Any thread.
    public var port: Int? {
        guard isInternet else { return nil }
        // sin_port and sin6_port are at the same offset.
        let offset = MemoryLayout<sockaddr_in>.offset(of: \.sin_port)!
        return bytes.withUnsafeBytes {
            Int(UInt16(bigEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt16.self)))
        }
    }

    /// The Unix socket path, for a Unix address.
    var unixPath: String? {
        guard case .bytes(let bytes) = storage, !isInternet else { return nil }
        let header = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        return String(decoding: bytes[header..<(bytes.count - 1)], as: UTF8.self)
    }

    /// Calls `body` with the address as a `sockaddr` and its length.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        bytes.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }

    /// `127.0.0.1:8080`, `[::1]:8080` or `unix:/path`.
    public var description: String {
        if let path = unixPath { return "unix:\(path)" }
        let isIPv6 = family == AF_INET6
        let offset =
            isIPv6
            ? MemoryLayout<sockaddr_in6>.offset(of: \.sin6_addr)! : MemoryLayout<sockaddr_in>.offset(of: \.sin_addr)!
        let host = bytes.withUnsafeBytes { raw in
            Platform.internetAddressText(family: family, raw.baseAddress! + offset)
        }
        return isIPv6 ? "[\(host)]:\(port!)" : "\(host):\(port!)"
    }
}

extension SocketAddress {
    /// The addresses `host` names, for TCP to `port`, in the order `getaddrinfo` gives them.
    ///
    /// Any thread or task. The look-up blocks, so it runs on a thread of `LoopWorkPool.shared`,
    /// never on a loop's thread. Throws a `LoopError` if the port is out of range or the name does
    /// not resolve (`systemError` is set when the resolver failed with a system error), or if the
    /// shared pool was shut down; `CancellationError` if the task is cancelled before the look-up
    /// starts.
    public static func resolve(host: String, port: Int) async throws -> [SocketAddress] {
        try checkPort(port)
        return try await BlockingWork.run { () throws(LoopError) -> [SocketAddress] in
            try Platform.resolve(host: host, port: port)
        }
    }

    /// The address of `raw`'s bytes (a `sockaddr` of its family).
    init(raw: UnsafeRawBufferPointer) {
        self.init(sockaddr: raw)
    }
}
