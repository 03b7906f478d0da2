#ifndef RAW_LIBUV_H
#define RAW_LIBUV_H

// The benchmark's workloads written on libuv 1.x in C, each in libuv's own idiom (a `raw_peer`,
// include/raw_peer.h of CRawPeer):
//
// - A loop that takes work from other threads is one pthread with its own uv_loop_t, a
//   uv_async_t and a mutex-protected queue of malloc'd items, each freed on the loop thread after
//   it ran (uv_async_send coalesces wake-ups by itself).
// - Timers are uv_timer_t (uv_timer_init + uv_timer_start, millisecond timeouts from the loop's
//   cached time uv_now), closed with uv_close.
// - The busy loop is a uv_idle_t; its observers are uv_prepare_t (before polling) and uv_check_t
//   (after polling) handles.
// - Descriptors are watched with uv_poll_t (UV_READABLE).
// - An idle loop counts uv_run(UV_RUN_ONCE) returns.
// - The socket workloads are uv_tcp_t streams: uv_listen/uv_accept, uv_tcp_connect,
//   uv_read_start with one 64 KiB read buffer per loop, uv_try_write then uv_write, and
//   write_queue_size as the bulk sender's backpressure (raw_libuv_sockets.c).

#include "raw_peer.h"
#include "raw_peer_sockets.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The workloads on libuv.
const raw_peer *raw_libuv_peer(void);

/// UDP echo over loopback: `round_trips` sequential round trips of `message`-byte datagrams
/// between two sockets on two loop threads (raw_libuv_udp.c).
raw_sock_result raw_libuv_udp_echo(int round_trips, int message, double timeout_seconds);
/// `datagrams` datagrams of `message` bytes from one socket to another on another loop thread,
/// at most `window` unacknowledged (raw_libuv_udp.c).
raw_sock_result raw_libuv_udp_flood(long long datagrams, int message, int window, double timeout_seconds);
/// `files` files created in `directory` (empty, which exists) under a uv_fs_event_t while the loop
/// does not run, then the seconds uv_run takes to deliver their `files` events
/// (raw_libuv_fswatch.c).
raw_sock_result raw_libuv_file_watch(const char *directory, int files, double timeout_seconds);

#ifdef __cplusplus
}
#endif

#endif
