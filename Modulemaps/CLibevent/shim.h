#ifndef RUNLOOPKIT_CLIBEVENT_SHIM_H
#define RUNLOOPKIT_CLIBEVENT_SHIM_H

// libevent, and only libevent: the platform's own calls are in Sources/CPlatform.
//
// System headers first: Debian's event-config.h defines _GNU_SOURCE, and
// including it before these makes Glibc's fd_set differ from Swift's Glibc.
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/buffer.h>

// Function-like macros do not import into Swift; libevent takes `short` where
// the EV_* constants import as Int32.

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

/// Drops libevent's own log lines: RunLoopKit reports failures through return codes instead, and
/// libevent warns on benign races such as a descriptor closed before its event was deleted.
static void rlk_event_log_discard(int severity, const char *message) {
    (void)severity;
    (void)message;
}

static inline void rlk_quiet_libevent_logs(void) {
    event_set_log_callback(rlk_event_log_discard);
}

#endif
