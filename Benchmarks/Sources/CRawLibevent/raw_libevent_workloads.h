#ifndef RAW_LIBEVENT_WORKLOADS_H
#define RAW_LIBEVENT_WORKLOADS_H

// Between the files of the libevent peer: the timer, busy-loop and memory workloads
// (raw_libevent_workloads.c) and the socket workloads (raw_libevent_sockets.c), which
// raw_libevent.c puts in the peer's table.

#include "raw_peer.h"

struct event_base;
struct raw_socket_ops;

/// The event_base of a raw loop (raw_libevent.c); on the loop's thread only.
struct event_base *lev_loop_base(void *loop);
/// The server I/O workloads on bufferevents and an evconnlistener (raw_libevent_sockets.c).
extern const struct raw_socket_ops lev_socket_ops;

/// A base with EVENT_BASE_FLAG_NOLOCK (only its loop's thread touches it), and with `precise`,
/// EVENT_BASE_FLAG_PRECISE_TIMER too.
struct event_base *lev_new_base(int precise);

raw_timers_result lev_timers(int count, const double *offsets, double lead_seconds, double *lateness_us,
                             double timeout_seconds);
raw_churn_result lev_timer_churn(long long timers, int window);
raw_churn_result lev_items_at_scale(int count, const int32_t *removal_order, int sources);
raw_churn_result lev_schedule_cancel(long long blocks, int fire_half);
raw_iteration_result lev_iteration(double seconds, int observers);
void *lev_timer_set_new(int count);
void lev_timer_set_fill(void *set);
void lev_timer_set_free(void *set);

#endif
