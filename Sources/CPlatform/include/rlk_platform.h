#ifndef RUNLOOPKIT_PLATFORM_H
#define RUNLOOPKIT_PLATFORM_H

// The Linux facilities RunLoopKit needs beyond what Swift's Glibc module imports: eventfd and
// timerfd, process-wide signal routing, thread identity and names, pidfds, accept4, file
// actions for posix_spawn, and libdispatch's main-queue hooks. Each is wrapped once here and once
// in Sources/RunLoopKit/Platform/ (with the EINTR rule of its SystemCall.swift); libevent itself is
// CLibevent's alone.

#include <sys/types.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>

/// The kernel thread id (`gettid`), which equals the process id on the main thread.
int rlk_gettid(void);

/// The calling thread's loop (RunLoopKit's `Loop`, unretained), or NULL: a mirror of the pthread
/// key that owns it, read on every item added or removed to tell the loop's own thread from
/// others. Initial-exec TLS, so a read is one instruction, where `pthread_getspecific` is a call.
extern __thread void *rlk_current_loop __attribute__((tls_model("initial-exec")));

static inline void *rlk_get_current_loop(void) { return rlk_current_loop; }
static inline void rlk_set_current_loop(void *loop) { rlk_current_loop = loop; }

/// Names the calling thread (`prctl(PR_SET_NAME)`; the kernel keeps 15 bytes).
void rlk_set_thread_name(const char *name);

/// `fstat`'s file type bits for `fd`, or -errno.
int rlk_descriptor_type(int fd);

/// Whether epoll can watch `fd`: 0 if a scratch epoll instance took it, -errno if `epoll_ctl`
/// refused it (EPERM: a regular file, a directory, a character device such as /dev/null), 1 if
/// no scratch instance could be made (out of descriptors: nothing is known then).
int rlk_epoll_probe(int fd);

/// The epoll descriptor of this process that has `fd` registered, found through /proc/self/fd
/// and /proc/self/fdinfo (each epoll descriptor's `tfd:` lines); -1 if none has it, -errno if
/// /proc/self/fd cannot be read.
int rlk_epoll_watching(int fd);

/// MSG_NOSIGNAL, for `send` and `sendmsg`: a peer that has gone raises no SIGPIPE. (A constant of
/// an anonymous enum in glibc, which Swift's Glibc module does not always import.)
static inline int rlk_msg_nosignal(void) { return MSG_NOSIGNAL; }

/// SOCK_STREAM, for `getaddrinfo` hints.
static inline int rlk_sock_stream(void) { return SOCK_STREAM; }

/// SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, for `socket`.
static inline int rlk_stream_socket_type(void) { return SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC; }

/// `socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)`: a child process's standard stream, both ends
/// blocking (the parent makes its own end non-blocking). -1 with errno on failure.
static inline int rlk_stream_socket_pair(int fds[2]) { return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds); }

/// `accept4` with SOCK_NONBLOCK | SOCK_CLOEXEC: the accepted socket is non-blocking and not
/// inherited by child processes, in one system call. -1 with errno on failure.
int rlk_accept(int fd, struct sockaddr *addr, socklen_t *addrlen);

// MARK: Datagrams (datagrams.c)

/// The most datagrams one `rlk_receive_datagrams` or `rlk_send_datagrams` call moves.
#define RLK_DATAGRAM_BATCH 64

/// `socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)`: -1 with errno on failure.
int rlk_datagram_socket(int family);

/// What `rlk_receive_datagrams` says of one datagram: its sender, its real length (more than the
/// slot's size when it was truncated) and whether it was truncated.
struct rlk_received {
    struct sockaddr_storage address;
    socklen_t address_length;
    size_t length;
    int truncated;
};

/// `recvmmsg(MSG_DONTWAIT | MSG_TRUNC)` of up to `count` (at most RLK_DATAGRAM_BATCH) datagrams
/// into consecutive `size`-byte slots of `buffer`: how many were received, or -1 with errno.
int rlk_receive_datagrams(int fd, unsigned char *buffer, size_t size, struct rlk_received *received,
                          unsigned int count);

/// One datagram to send: its bytes and its destination (`address_length` 0: the connected peer).
struct rlk_outgoing {
    const void *bytes;
    size_t length;
    struct sockaddr_storage address;
    socklen_t address_length;
};

/// Sends up to `count` (at most RLK_DATAGRAM_BATCH) datagrams in order with MSG_DONTWAIT |
/// MSG_NOSIGNAL: one with `sendto`, more with one `sendmmsg`. How many were sent (the first one
/// not sent failed, or would have blocked), or -1 with errno when the first one failed.
int rlk_send_datagrams(int fd, const struct rlk_outgoing *outgoing, unsigned int count);

/// IP_ADD_MEMBERSHIP (`join` 1) or IP_DROP_MEMBERSHIP on `interface` (NULL: INADDR_ANY, the
/// kernel's choice). -1 with errno on failure.
int rlk_join_ipv4_group(int fd, const struct sockaddr_in *group, const struct sockaddr_in *interface, int join);
/// IPV6_ADD_MEMBERSHIP (`join` 1) or IPV6_DROP_MEMBERSHIP on interface `interface_index` (0: the
/// kernel's choice). -1 with errno on failure.
int rlk_join_ipv6_group(int fd, const struct sockaddr_in6 *group, unsigned int interface_index, int join);
/// IP_MULTICAST_IF: multicast goes out of the interface with this address.
int rlk_set_ipv4_multicast_interface(int fd, const struct sockaddr_in *interface);
/// IPV6_MULTICAST_IF.
int rlk_set_ipv6_multicast_interface(int fd, unsigned int interface_index);
/// IP_MULTICAST_TTL or IPV6_MULTICAST_HOPS for `family`.
int rlk_set_multicast_hops(int fd, int family, int hops);
/// IP_MULTICAST_LOOP or IPV6_MULTICAST_LOOP for `family`.
int rlk_set_multicast_loop(int fd, int family, int enabled);
/// The index of the interface that has the IPv6 address `address` (`getifaddrs`), or -1 with
/// errno (EADDRNOTAVAIL when no interface has it).
int rlk_interface_index(const struct sockaddr_in6 *address);

// MARK: Process-wide signal delivery
//
// A signal sent to the process may land on any thread, including threads that know nothing of
// RunLoopKit. The handler only does async-signal-safe work: it writes to the eventfds of the
// signal sources registered for that signal, and each loop reads its eventfd like any other
// descriptor. Callers serialise attach and detach.

/// The most sources one signal may have at a time.
#define RLK_SIGNAL_SLOTS 16

/// Routes `signo` to `fd`; the first registration for a signal installs the handler with
/// `sigaction` (SA_RESTART), saving the previous action. Returns the slot, -1 if all slots are
/// taken, -2 if `sigaction` failed.
int rlk_signal_attach(int signo, int fd);

/// Unroutes a slot; the last one restores the previous action. On return no handler is still
/// writing to the slot's descriptor, so the caller may close it.
void rlk_signal_detach(int signo, int slot);

/// Unblocks `signo` in the calling thread: a process started from a thread that blocks it (as
/// Dispatch and Swift concurrency threads do) inherits it blocked everywhere, and a blocked signal
/// stays pending instead of reaching the handler.
void rlk_signal_unblock(int signo);

// MARK: Child processes

/// `pidfd_open(pid, 0)`: -1 with errno on failure.
int rlk_pidfd_open(pid_t pid);

/// `pidfd_send_signal(pidfd, signo, NULL, 0)`: -1 with errno on failure.
int rlk_pidfd_send_signal(int pidfd, int signo);

/// `posix_spawn_file_actions_addclosefrom_np`: every descriptor from `from` up is closed in the
/// child. An errno on failure, 0 on success.
int rlk_spawn_add_close_from(posix_spawn_file_actions_t *actions, int from);

/// `posix_spawn_file_actions_addchdir_np`. An errno on failure, 0 on success.
int rlk_spawn_add_chdir(posix_spawn_file_actions_t *actions, const char *path);

// MARK: The main dispatch queue
//
// libdispatch's hooks for a run loop that drains the main queue (what CoreFoundation uses): on
// Linux the handle is an eventfd that libdispatch writes when the main queue has work.

int rlk_main_queue_handle(void);
void rlk_main_queue_drain(void);

/// Under AddressSanitizer, marks `bytes` at `address` as not to be touched (`poison`) or usable
/// again (`unpoison`), for memory RunLoopKit hands out itself (a port's chunks), so that a use
/// after it was given back is reported as malloc's would be. Nothing in other builds; 1 from
/// `rlk_address_sanitizer_enabled` when it is on, and from `rlk_memory_is_poisoned` for a
/// poisoned byte.
void rlk_poison_memory(void *address, size_t bytes);
void rlk_unpoison_memory(void *address, size_t bytes);
int rlk_memory_is_poisoned(void *address);
int rlk_address_sanitizer_enabled(void);

/// A spin-wait hint (`pause` on x86, `yield` on Arm): lets a sibling hardware thread run and
/// saves power while the loop polls for work before sleeping.
static inline void rlk_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
