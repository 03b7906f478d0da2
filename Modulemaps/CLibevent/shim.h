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

#include <event2/event.h>

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

#endif
