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

#include "raw_peer.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The workloads on libuv.
const raw_peer *raw_libuv_peer(void);

#ifdef __cplusplus
}
#endif

#endif
