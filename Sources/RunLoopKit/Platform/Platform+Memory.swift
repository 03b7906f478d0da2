internal import CPlatform
import Glibc

// Memory mapped for RunLoopKit's own stores (ports' chunks: PortChunkStore.swift). The EINTR rule:
// SystemCall.swift (none of these calls is interrupted).

extension Platform {
    /// `mmap` of `bytes` of fresh anonymous memory, private to the process, readable and writable:
    /// zeroed pages that are given memory as they are first touched. ENOMEM if the address space
    /// or the overcommit limit ran out.
    static func mapMemory(_ bytes: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        let address = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let address, address != MAP_FAILED else { return .failure(.current) }
        return .success(address)
    }

    /// Under AddressSanitizer, marks memory RunLoopKit handed out itself as given back: a later
    /// access is reported as a use after free. Nothing in other builds.
    static func markReleased(_ address: UnsafeMutableRawPointer, bytes: Int) {
        rlk_poison_memory(address, bytes)
    }

    /// Undoes `markReleased`, as the memory is handed out again.
    static func markInUse(_ address: UnsafeMutableRawPointer, bytes: Int) {
        rlk_unpoison_memory(address, bytes)
    }

    /// Whether the byte at `address` is marked released (always false without AddressSanitizer).
    static func isMarkedReleased(_ address: UnsafeMutableRawPointer) -> Bool {
        rlk_memory_is_poisoned(address) != 0
    }

    /// Whether the C side was built with AddressSanitizer (so `markReleased` does something).
    static var checksAddresses: Bool { rlk_address_sanitizer_enabled() != 0 }

    /// `munmap`: the range's addresses and memory go back to the kernel. Fails only on a
    /// programmer error (an unaligned range), which is not reported.
    static func unmapMemory(_ address: UnsafeMutableRawPointer, bytes: Int) {
        _ = munmap(address, bytes)
    }

    /// `madvise(MADV_DONTNEED)` of whole pages: gives their memory back to the kernel and keeps
    /// the addresses, which read as zeros when next touched. Fails only on a programmer error (an
    /// unaligned or unmapped range), which is not reported.
    static func discardMemory(_ address: UnsafeMutableRawPointer, bytes: Int) {
        _ = madvise(address, bytes, MADV_DONTNEED)
    }
}
