#ifndef RUNLOOPKIT_CLIBEVENT_SHIM_H
#define RUNLOOPKIT_CLIBEVENT_SHIM_H

// System headers first: Debian's event-config.h defines _GNU_SOURCE, and
// including it before these makes Glibc's fd_set differ from Swift's Glibc.
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <stdint.h>
#include <stdatomic.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/un.h>
#include <sys/uio.h>

#include <event2/event.h>
#include <event2/buffer.h>

// Function-like macros do not import into Swift; libevent takes `short` where
// the EV_* constants import as Int32.

/// `evtimer_new`: a timer event with no descriptor.
static inline struct event *rlk_evtimer_new(struct event_base *base,
                                            event_callback_fn cb, void *arg) {
    return evtimer_new(base, cb, arg);
}

/// `event_new` for a descriptor with the EV_* flags given as an int.
static inline struct event *rlk_event_new(struct event_base *base, int fd,
                                          int flags, event_callback_fn cb,
                                          void *arg) {
    return event_new(base, fd, (short)flags, cb, arg);
}

/// `event_assign` for a descriptor with the EV_* flags given as an int.
static inline int rlk_event_assign(struct event *ev, struct event_base *base, int fd,
                                   int flags, event_callback_fn cb, void *arg) {
    return event_assign(ev, base, fd, (short)flags, cb, arg);
}

/// `evtimer_pending` with no timeout out-parameter.
static inline int rlk_evtimer_pending(struct event *ev) {
    return evtimer_pending(ev, NULL);
}

/// The kernel thread id (`gettid`), which equals the process id on the main thread.
static inline int rlk_gettid(void) {
    return (int)syscall(SYS_gettid);
}

/// Names the calling thread (`prctl(PR_SET_NAME)`; the kernel keeps 15 bytes).
static inline void rlk_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

// MARK: Process-wide signal delivery
//
// A signal sent to the process may land on any thread, including threads that know nothing of
// RunLoopKit. The handler below only does async-signal-safe work: it writes to the eventfds of
// the signal sources registered for that signal, and each loop reads its eventfd like any other
// descriptor. Slots hold fd + 1 so that the zero-initialised table means "empty".
//
// These statics are instantiated once: only Sources/RunLoopKit/Backend/Libevent.swift imports
// this header.

#define RLK_SIGNAL_LIMIT 65
#define RLK_SIGNAL_SLOTS 16

// Function-local statics: Swift's importer emits the functions that use them, not file-scope
// static variables of a header.
typedef struct {
    _Atomic int slots[RLK_SIGNAL_LIMIT][RLK_SIGNAL_SLOTS];
    _Atomic int handlers_running;
    struct sigaction previous[RLK_SIGNAL_LIMIT];
} rlk_signal_table_t;

static inline rlk_signal_table_t *rlk_signal_table(void) {
    static rlk_signal_table_t table;
    return &table;
}

static void rlk_signal_handler(int signo) {
    int saved = errno;
    atomic_fetch_add(&rlk_signal_table()->handlers_running, 1);
    if (signo > 0 && signo < RLK_SIGNAL_LIMIT) {
        for (int i = 0; i < RLK_SIGNAL_SLOTS; i++) {
            int slot = atomic_load(&rlk_signal_table()->slots[signo][i]);
            if (slot > 0) {
                uint64_t one = 1;
                ssize_t ignored = write(slot - 1, &one, sizeof one);
                (void)ignored;
            }
        }
    }
    atomic_fetch_sub(&rlk_signal_table()->handlers_running, 1);
    errno = saved;
}

/// Routes `signo` to `fd`; the first registration for a signal installs the handler with
/// `sigaction` (SA_RESTART), saving the previous action. Returns the slot, -1 if all slots are
/// taken, -2 if `sigaction` failed. Callers serialise attach and detach.
static inline int rlk_signal_attach(int signo, int fd) {
    int used = 0, free_slot = -1;
    for (int i = 0; i < RLK_SIGNAL_SLOTS; i++) {
        if (atomic_load(&rlk_signal_table()->slots[signo][i]) > 0) used++;
        else if (free_slot < 0) free_slot = i;
    }
    if (free_slot < 0) return -1;
    atomic_store(&rlk_signal_table()->slots[signo][free_slot], fd + 1);
    if (used == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = rlk_signal_handler;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        if (sigaction(signo, &action, &rlk_signal_table()->previous[signo]) != 0) {
            atomic_store(&rlk_signal_table()->slots[signo][free_slot], 0);
            return -2;
        }
    }
    return free_slot;
}

/// Unblocks `signo` in the calling thread: a process started from a thread that blocks it (as
/// Dispatch and Swift concurrency threads do) inherits it blocked everywhere, and a blocked signal
/// stays pending instead of reaching the handler.
static inline void rlk_signal_unblock(int signo) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/// Unroutes a slot; the last one restores the previous action. On return no handler is still
/// writing to the slot's descriptor, so the caller may close it.
static inline void rlk_signal_detach(int signo, int slot) {
    atomic_store(&rlk_signal_table()->slots[signo][slot], 0);
    int used = 0;
    for (int i = 0; i < RLK_SIGNAL_SLOTS; i++) {
        if (atomic_load(&rlk_signal_table()->slots[signo][i]) > 0) used++;
    }
    if (used == 0) sigaction(signo, &rlk_signal_table()->previous[signo], NULL);
    while (atomic_load(&rlk_signal_table()->handlers_running) > 0) sched_yield();
}

// MARK: The main dispatch queue
//
// libdispatch's hooks for a run loop that drains the main queue (what CoreFoundation uses): on
// Linux the handle is an eventfd that libdispatch writes when the main queue has work.

extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *msg);

static inline int rlk_main_queue_handle(void) {
    return _dispatch_get_main_queue_handle_4CF();
}

static inline void rlk_main_queue_drain(void) {
    _dispatch_main_queue_callback_4CF(NULL);
}

/// `fstat`'s file type bits for `fd`, or -errno.
static inline int rlk_descriptor_type(int fd) {
    struct stat info;
    if (fstat(fd, &info) != 0) return -errno;
    return (int)(info.st_mode & S_IFMT);
}

/// Drops libevent's own log lines: RunLoopKit reports failures through return codes instead, and
/// libevent warns on benign races such as a descriptor closed before its event was deleted.
static void rlk_event_log_discard(int severity, const char *message) {
    (void)severity;
    (void)message;
}

static inline void rlk_quiet_libevent_logs(void) {
    event_set_log_callback(rlk_event_log_discard);
}

/// A spin-wait hint (`pause` on x86, `yield` on Arm): lets a sibling hardware thread run and
/// saves power while the loop polls for work before sleeping.
static inline void rlk_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// MARK: Sockets

// `accept4` is a GNU extension: <sys/socket.h> declares it only under _GNU_SOURCE, which this header
// must not define before the system headers (see above).
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/// `accept4` with SOCK_NONBLOCK | SOCK_CLOEXEC: the accepted socket is non-blocking and not
/// inherited by child processes, in one system call.
static inline int rlk_accept(int fd, struct sockaddr *addr, socklen_t *addrlen) {
    return accept4(fd, addr, addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

#endif
