internal import COpenSSL
import Glibc

// OpenSSL 3 (Debian's libssl-dev), wrapped once: every call RunLoopKit makes to it is in the
// OpenSSL*.swift files (this one: its errors; the credentials, context and session each in a
// file of their own). Contexts are shared and immutable once made; a session (one connection's
// SSL object) belongs to its connection's loop thread. OpenSSL's error queue is per thread: each
// call that can fail starts from an empty queue and leaves one.

/// Turns OpenSSL's failures into `LoopError`s that carry its reason strings.
enum OpenSSL {
    /// The reasons OpenSSL queued on this thread, oldest first, joined with "; " (nil when none);
    /// the queue is left empty. Reasons only (`certificate verify failed`, `no shared cipher`):
    /// never the data of a file or a key.
    static func takeReasons() -> String? {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            guard code != 0 else { break }
            if let reason = ERR_reason_error_string(code) {
                let text = String(cString: reason)
                if !reasons.contains(text) { reasons.append(text) }
            } else {
                reasons.append("error \(code)")
            }
        }
        return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }

    /// `what` failed, with OpenSSL's reasons (or `fallback` when it queued none).
    static func error(_ what: String, fallback: String = "unknown OpenSSL error", systemError: Int32? = nil)
        -> LoopError
    {
        LoopError("\(what): \(takeReasons() ?? fallback)", systemError: systemError)
    }

    /// Clears the calling thread's error queue, before a call whose failure is read from it.
    static func clearErrors() { ERR_clear_error() }
}
