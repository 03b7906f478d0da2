#ifndef RAW_GLIB_H
#define RAW_GLIB_H

// The benchmark's workloads written on GLib 2's main loop in C, each in GLib's own idiom (a
// `raw_peer`, include/raw_peer.h of CRawPeer):
//
// - A loop that takes work from other threads is one pthread that owns a GMainContext and runs
//   g_main_context_iteration; other threads post with g_main_context_invoke (an idle GSource per
//   item, attached under the context's lock, each attach waking the loop).
// - Timers are g_timeout_source_new sources (millisecond intervals), attached to the context.
// - The busy loop is an idle source that stays ready; its observers are custom GSources whose
//   prepare and check functions GLib calls before and after polling on every pass.
// - Descriptors are watched with g_unix_fd_source_new (what g_unix_fd_add attaches to the
//   default context), attached to each loop's own context.
// - An idle loop counts g_main_context_iteration returns.
// - The socket workloads are non-blocking sockets watched the same way, read and written with
//   recv/send/sendmsg, with an output queue of GBytes per connection (raw_glib_sockets.c).

#include "raw_peer.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The workloads on GLib.
const raw_peer *raw_glib_peer(void);

#ifdef __cplusplus
}
#endif

#endif
