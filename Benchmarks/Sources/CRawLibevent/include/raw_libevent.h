#ifndef RAW_LIBEVENT_H
#define RAW_LIBEVENT_H

// The benchmark's workloads done directly on libevent 2.1 in C: the practical floor that
// RunLoopKit is compared against (a `raw_peer`, include/raw_peer.h of CRawPeer).
//
// Loops that receive work from other threads ("raw loops") are one pthread each with its own
// event_base (EVENT_BASE_FLAG_NOLOCK: only the loop's thread touches it), a mutex-protected queue
// of (function, context) items and an eventfd written once per batch (coalesced wake-up).
// Timer workloads use EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_PRECISE_TIMER (CLOCK_MONOTONIC and a
// timerfd instead of the 4 ms CLOCK_MONOTONIC_COARSE). Timers are evtimers (event_new +
// event_add); the busy loop is an event that re-activates itself (event_active), with six
// function pointers called before timers and before sources (libevent 2.1 has no observers);
// descriptors are persistent EV_READ events; an idle loop counts event_base_loop(EVLOOP_ONCE)
// returns.

#include "raw_peer.h"
#include "raw_peer_sockets.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Whether the libevent linked is 2.1 or newer.
int raw_libevent_version_ok(void);
/// `event_get_version()`.
const char *raw_libevent_version(void);
/// The workloads on libevent.
const raw_peer *raw_libevent_peer(void);

/// UDP echo over loopback: `round_trips` sequential round trips of `message`-byte datagrams
/// between two sockets on two loop threads (raw_libevent_udp.c).
raw_sock_result raw_libevent_udp_echo(int round_trips, int message, double timeout_seconds);
/// `datagrams` datagrams of `message` bytes from one socket to another on another loop thread,
/// at most `window` unacknowledged (raw_libevent_udp.c).
raw_sock_result raw_libevent_udp_flood(long long datagrams, int message, int window, double timeout_seconds);

#ifdef __cplusplus
}
#endif

#endif
