// A GLib main context on its own thread that takes work from other threads through
// g_main_context_invoke (raw_glib_loop.h).

#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>

#include "raw_glib_loop.h"

static void *gl_main(void *arg) {
    gl_loop *loop = arg;
    // Owned by this thread from the start: g_main_context_invoke from any other thread then
    // attaches an idle source and wakes this one.
    g_main_context_acquire(loop->context);
    raw_latch_open(&loop->ready);
    while (!loop->stop) {
        g_main_context_iteration(loop->context, TRUE);
        __atomic_add_fetch(&loop->iterations, 1, __ATOMIC_RELAXED);
    }
    g_main_context_release(loop->context);
    raw_latch_open(&loop->exited);
    return NULL;
}

static void gl_free(gl_loop *loop) {
    g_main_context_unref(loop->context);
    raw_latch_destroy(&loop->ready);
    raw_latch_destroy(&loop->exited);
    free(loop);
}

gl_loop *gl_start(void) {
    gl_loop *loop = calloc(1, sizeof *loop);
    if (!loop) return NULL;
    loop->context = g_main_context_new();
    raw_latch_init(&loop->ready);
    raw_latch_init(&loop->exited);
    if (pthread_create(&loop->thread, NULL, gl_main, loop) != 0) {
        gl_free(loop);
        return NULL;
    }
    if (!raw_latch_wait(&loop->ready, 10.0)) {
        pthread_detach(loop->thread);  // leaked: never touched again
        return NULL;
    }
    return loop;
}

// GLib's GMutex is a futex of its own, which ThreadSanitizer cannot see: to it, what a poster
// wrote before g_main_context_invoke and the invoked function reads on the loop thread are
// unordered (a false data race, reported only when the loop thread finds the idle source before
// it reads the wake-up eventfd, which ThreadSanitizer does see). Under ThreadSanitizer the hand-off
// is declared to it: released on the poster's side, acquired before the function runs. Other
// builds call GLib exactly as a GLib user would.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GL_SEEN_BY_TSAN 1
#endif
#endif

#ifdef GL_SEEN_BY_TSAN
#include <sanitizer/tsan_interface.h>

typedef struct {
    raw_fn fn;
    void *context;
} gl_posted;

static gboolean gl_posted_run(gpointer posted) {
    __tsan_acquire(posted);
    gl_posted *item = posted;
    return item->fn(item->context);
}

static void gl_invoke(GMainContext *context, raw_fn fn, void *data) {
    gl_posted *item = g_new(gl_posted, 1);
    item->fn = fn;
    item->context = data;
    __tsan_release(item);
    g_main_context_invoke_full(context, G_PRIORITY_DEFAULT, gl_posted_run, item, g_free);
}
#else
// raw_fn is GSourceFunc's type: gboolean is an int, gpointer a void *.
static void gl_invoke(GMainContext *context, raw_fn fn, void *data) { g_main_context_invoke(context, fn, data); }
#endif

void gl_post(gl_loop *loop, raw_fn fn, void *context) { gl_invoke(loop->context, fn, context); }

static gboolean gl_typical_run(gpointer context) {
    raw_typical_run(context);
    g_free(context);
    return G_SOURCE_REMOVE;
}

/// The idle source's data is a copy of the values, freed on the loop thread.
void gl_post_typical(gl_loop *loop, const raw_typical *values) {
    gl_invoke(loop->context, gl_typical_run, g_memdup2(values, sizeof *values));
}

static int gl_stop_item(void *context) {
    gl_loop *loop = context;
    loop->stop = 1;
    return G_SOURCE_REMOVE;
}

int gl_stop(gl_loop *loop) {
    if (!loop) return 1;
    gl_post(loop, gl_stop_item, loop);
    if (!raw_latch_wait(&loop->exited, 10.0)) {
        pthread_detach(loop->thread);
        return 0;
    }
    pthread_join(loop->thread, NULL);
    gl_free(loop);
    return 1;
}

guint gl_interval_ms(double due) {
    double interval = ceil((due - raw_mono_now()) * 1e3);
    return interval > 0 ? (guint)interval : 0;
}
