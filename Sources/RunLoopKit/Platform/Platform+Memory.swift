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
