#ifndef RAW_GLIB_LOOP_H
#define RAW_GLIB_LOOP_H

// A GLib main context on its own thread, fed through g_main_context_invoke (raw_glib_loop.c);
// shared by the workloads of raw_glib.c.

#include <glib.h>
#include <pthread.h>

#include "raw_peer.h"

typedef struct {
    GMainContext *context;
    int stop;              // loop thread only
    long long iterations;  // g_main_context_iteration returns (atomic)
    pthread_t thread;
    raw_latch ready, exited;
} gl_loop;

gl_loop *gl_start(void);
void gl_post(gl_loop *loop, raw_fn fn, void *context);
void gl_post_typical(gl_loop *loop, const raw_typical *values);
int gl_stop(gl_loop *loop);

/// Whole milliseconds from now to `due` (CLOCK_MONOTONIC seconds, GLib's monotonic time),
/// rounded up so that a timeout is never asked to fire early.
guint gl_interval_ms(double due);

#endif
