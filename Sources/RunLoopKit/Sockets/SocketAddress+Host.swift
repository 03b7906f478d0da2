// What the datagram and TLS code read of an address: its family's name, its host, and whether it is multicast.

import Glibc

extension SocketAddress {
    /// The IP address as text (`127.0.0.1`, `::1`), nil for a Unix path.
    var host: String? {
        guard isInternet else { return nil }
        let text = description
        if text.hasPrefix("["), let end = text.firstIndex(of: "]") {
            return String(text[text.index(after: text.startIndex)..<end])
        }
        guard let colon = text.lastIndex(of: ":") else { return text }
        return String(text[..<colon])
    }

    /// "IPv4", "IPv6" or "Unix".
    static func familyName(_ family: Int32) -> String {
        switch family {
        case AF_INET: "IPv4"
        case AF_INET6: "IPv6"
        default: "Unix"
        }
    }

    /// Whether this is an IPv4 (224.0.0.0/4) or IPv6 (ff00::/8) multicast address.
    var isMulticast: Bool {
        switch family {
        case AF_INET:
            let offset = MemoryLayout<sockaddr_in>.offset(of: \.sin_addr)!
            return bytes[offset] & 0xF0 == 0xE0
        case AF_INET6:
            let offset = MemoryLayout<sockaddr_in6>.offset(of: \.sin6_addr)!
            return bytes[offset] == 0xFF
        default:
            return false
        }
    }

    /// The host alone for an IP address (`239.1.2.3`, `ff02::1`), the description otherwise.
    var hostDescription: String { host ?? description }
}
