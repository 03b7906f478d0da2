// libFuzzer entry point for the TLS engine's server side: each input is ciphertext from a client,
// given to a fresh server session without a socket (its BIO takes the ciphertext from `cipherIn`
// and keeps what it makes in `unsent`), in two parts split at a point taken from the data. The
// handshake is taken as far as the input allows, then whatever is left is decrypted. Checked for every input:
//   - no trap and no memory error (AddressSanitizer) in the BIO, the handshake, decryption or the
//     error mapping;
//   - a failure carries a reason (OpenSSL's, never empty);
//   - plaintext only comes out of a completed handshake.
//
// Built by `make fuzz-tls` (part of `make fuzz`) with `swiftc -sanitize=fuzzer,address -parse-as-library`, compiled
// together with RunLoopKit's sources into one module (not through SwiftPM). The certificate and
// key are made by the openssl command line at start-up, in FUZZ_TLS_DIR.

import Glibc

/// The server context of every run, made once.
private let context: OpenSSLContext = {
    let directory = getenv("FUZZ_TLS_DIR").map { String(cString: $0) } ?? "/tmp"
    let configuration = try! TLSConfiguration.server(
        certificateChain: directory + "/cert.pem", privateKey: directory + "/key.pem")
    return try! configuration.context()
}()

private func split(_ bytes: UnsafeRawBufferPointer) -> Int {
    guard bytes.count > 1 else { return bytes.count }
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return 1 + Int(hash % UInt64(bytes.count - 1))
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let session = try! OpenSSLSession(context, serverName: nil, verifyName: nil)
    let plaintext = EventBuffer()
    let cut = split(bytes)
    var established = false
    for part in [bytes[..<cut], bytes[cut...]] {
        session.cipherIn.append(UnsafeRawBufferPointer(rebasing: part))
        if !established {
            switch session.handshake().0 {
            case .done: established = true
            case .wantsInput: continue
            case .closeNotify: return 0
            case .failed(let reason):
                precondition(!reason.isEmpty, "a handshake failure without a reason")
                return 0
            }
        }
        let (count, stop, _) = session.decrypt(into: plaintext)
        precondition(count == 0 || established, "plaintext before the handshake completed")
        if case .failed(let reason) = stop {
            precondition(!reason.isEmpty, "a read failure without a reason")
            return 0
        }
    }
    return 0
}
