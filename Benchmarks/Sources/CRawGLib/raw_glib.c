// The benchmark's workloads on GLib (include/raw_glib.h); the cross-thread loop is in
// raw_glib_loop.c, posts and ping-pong in CRawPeer.

#define _GNU_SOURCE
#include <glib-unix.h>
#include <stdio.h>
#include <stdlib.h>

#include "raw_glib.h"
#include "raw_glib_loop.h"
#include "raw_glib_sockets.h"

/// A context of its own, owned by the calling thread for a workload that runs there.
static GMainContext *own_context(void) {
    GMainContext *context = g_main_context_new();
    g_main_context_acquire(context);
    return context;
}

/// Releases and frees `context` with every source still attached to it.
static void free_context(GMainContext *context) {
    g_main_context_release(context);
    g_main_context_unref(context);
}

/// Attaches a timeout of `interval_ms` calling `fn(data)` to `context`; the caller's reference.
static GSource *attach_timeout(GMainContext *context, guint interval_ms, GSourceFunc fn, gpointer data) {
    GSource *source = g_timeout_source_new(interval_ms);
    g_source_set_callback(source, fn, data, NULL);
    g_source_attach(source, context);
    return source;
}

/// The dispatch function of a custom source whose prepare and check never report it ready.
static gboolean never_dispatched(GSource *source, GSourceFunc callback, gpointer data) {
    (void)source;
    (void)callback;
    (void)data;
    return G_SOURCE_CONTINUE;
}

// MARK: Timers, scheduling cost and lateness

typedef struct glt_state glt_state;

typedef struct {
    glt_state *state;
    double due;
    int index;
} glt_timer;

struct glt_state {
    double *lateness_us;
    int count;
    int fired;
    int gave_up;
};

static gboolean timer_fired(gpointer data) {
    double now = raw_mono_now();
    glt_timer *timer = data;
    timer->state->lateness_us[timer->index] = (now - timer->due) * 1e6;
    timer->state->fired++;
    return G_SOURCE_REMOVE;
}

static gboolean timers_give_up(gpointer data) {
    ((glt_state *)data)->gave_up = 1;
    return G_SOURCE_REMOVE;
}

static raw_timers_result glt_timers(int count, const double *offsets, double lead_seconds, double *lateness_us,
                                    double timeout_seconds) {
    raw_timers_result result = {0, 0, 0, 0};
    if (count < 1) return result;
    GMainContext *context = own_context();
    glt_timer *timers = calloc((size_t)count, sizeof *timers);
    if (!timers) abort();
    glt_state state = {.lateness_us = lateness_us, .count = count};
    double first = raw_mono_now() + lead_seconds;
    double last_offset = 0;
    for (int i = 0; i < count; i++) {
        timers[i].state = &state;
        timers[i].due = first + offsets[i];
        timers[i].index = i;
        if (offsets[i] > last_offset) last_offset = offsets[i];
    }

    double start = raw_mono_now();
    for (int i = 0; i < count; i++) {
        // The context keeps the source until it has fired.
        g_source_unref(attach_timeout(context, gl_interval_ms(timers[i].due), timer_fired, &timers[i]));
    }
    double end = raw_mono_now();

    g_source_unref(attach_timeout(context, gl_interval_ms(first + last_offset + timeout_seconds), timers_give_up,
                                  &state));
    while (state.fired < count && !state.gave_up) g_main_context_iteration(context, TRUE);
    free_context(context);
    free(timers);

    return raw_timers_outcome(state.fired, count, start, end, first);
}

// MARK: Timer churn

static gboolean never_fires(gpointer data) {
    (void)data;
    return G_SOURCE_CONTINUE;
}

/// An hour away, jittered so that the sources are not added in order (GLib's timeouts are
/// milliseconds).
static guint hour_away_ms(long long index) { return 3600 * 1000 + (guint)((index * 7919) % 1000000) / 1000; }

static raw_churn_result glt_churn(long long timers, int window) {
    raw_churn_result result = {0, 0};
    if (timers < 1 || window < 1) return result;
    GMainContext *context = own_context();
    GSource **ring = calloc((size_t)window, sizeof *ring);
    if (!ring) abort();
    double start = raw_mono_now();
    for (long long i = 0; i < timers; i++) {
        GSource *source = attach_timeout(context, hour_away_ms(i), never_fires, NULL);
        size_t slot = (size_t)(i % window);
        if (ring[slot]) {
            g_source_destroy(ring[slot]);
            g_source_unref(ring[slot]);
        }
        ring[slot] = source;
    }
    for (int slot = 0; slot < window; slot++) {
        if (!ring[slot]) continue;
        g_source_destroy(ring[slot]);
        g_source_unref(ring[slot]);
    }
    double end = raw_mono_now();
    free(ring);
    free_context(context);
    result.ok = 1;
    result.seconds = end - start;
    return result;
}

// MARK: Items at scale

static gboolean never_ready_prepare(GSource *source, gint *timeout) {
    (void)source;
    *timeout = -1;
    return FALSE;
}

static gboolean never_ready_check(GSource *source) {
    (void)source;
    return FALSE;
}

/// A custom source that is never ready.
static GSourceFuncs never_ready_funcs = {never_ready_prepare, never_ready_check, never_dispatched, NULL, NULL, NULL};

static raw_churn_result glt_items_at_scale(int count, const int32_t *removal_order, int sources) {
    raw_churn_result result = {0, 0};
    if (count < 1) return result;
    GMainContext *context = own_context();
    GSource **items = calloc((size_t)count, sizeof *items);
    if (!items) abort();
    // Created before the clock starts, unreferenced (freed) after it stops.
    for (int i = 0; i < count; i++) {
        if (sources) {
            items[i] = g_source_new(&never_ready_funcs, sizeof(GSource));
        } else {
            // An hour away, jittered as in the churn.
            items[i] = g_timeout_source_new(hour_away_ms(i));
            g_source_set_callback(items[i], never_fires, NULL, NULL);
        }
    }
    // Measured: g_source_attach of every source, then g_source_destroy of each in the removal
    // order.
    double start = raw_mono_now();
    for (int i = 0; i < count; i++) g_source_attach(items[i], context);
    for (int i = 0; i < count; i++) g_source_destroy(items[removal_order[i]]);
    double end = raw_mono_now();
    for (int i = 0; i < count; i++) g_source_unref(items[i]);
    free(items);
    free_context(context);
    result.ok = 1;
    result.seconds = end - start;
    return result;
}

// MARK: Scheduled blocks: schedule and cancel

/// Fired blocks of the run in progress (runs are one at a time, on one thread).
static long long blocks_fired;

static gboolean block_fired(gpointer data) {
    (void)data;
    blocks_fired++;
    return G_SOURCE_REMOVE;  // a one-shot block: destroyed, and freed with its last reference
}

static raw_churn_result glt_schedule_cancel(long long blocks, int fire_half) {
    raw_churn_result result = {0, 0};
    if (blocks < 1) return result;
    GMainContext *context = own_context();
    blocks_fired = 0;
    long long firing = 0;
    double start = raw_mono_now();
    for (long long i = 0; i < blocks; i++) {
        GSource *source = attach_timeout(context, fire_half ? 0 : 3600 * 1000, block_fired, NULL);
        if (fire_half && (i & 1)) {
            firing++;
        } else {
            g_source_destroy(source);
        }
        g_source_unref(source);  // the context holds the ones still attached
    }
    double deadline = start + 600;
    while (blocks_fired < firing && raw_mono_now() < deadline) g_main_context_iteration(context, TRUE);
    double end = raw_mono_now();
    free_context(context);
    result.ok = blocks_fired == firing;
    result.seconds = end - start;
    return result;
}

// MARK: Iteration overhead

static long long busy_performed;
static long long observer_calls;

static gboolean busy_perform(gpointer data) {
    (void)data;
    busy_performed++;
    return G_SOURCE_CONTINUE;
}

static gboolean observer_prepare(GSource *source, gint *timeout) {
    (void)source;
    observer_calls++;
    *timeout = -1;
    return FALSE;
}

static gboolean observer_check(GSource *source) {
    (void)source;
    observer_calls++;
    return FALSE;
}

static GSourceFuncs observer_funcs = {observer_prepare, observer_check, never_dispatched, NULL, NULL, NULL};

static raw_iteration_result glt_iteration(double seconds, int observers) {
    raw_iteration_result result = {0, 0, 0, 0};
    if (observers < 0 || observers > 16) return result;
    // The context's own wake-up descriptor is in every poll, as a cross-thread loop's is.
    GMainContext *context = own_context();
    GSource *busy = g_idle_source_new();
    g_source_set_callback(busy, busy_perform, NULL, NULL);
    g_source_attach(busy, context);
    g_source_unref(busy);
    for (int o = 0; o < observers; o++) {
        GSource *observer = g_source_new(&observer_funcs, sizeof(GSource));
        g_source_attach(observer, context);
        g_source_unref(observer);
    }
    busy_performed = 0;
    observer_calls = 0;
    double start = raw_mono_now();
    double deadline = start + seconds;
    for (long long pass = 1;; pass++) {
        g_main_context_iteration(context, FALSE);
        if ((pass & 255) == 0 && raw_mono_now() >= deadline) break;
    }
    double end = raw_mono_now();
    free_context(context);
    result.ok = 1;
    result.seconds = end - start;
    result.iterations = busy_performed;
    result.observer_calls = observer_calls;
    return result;
}

// MARK: Descriptors and the idle loop's timer (the workloads are CRawPeer's)

typedef struct {
    GSource *source;
    raw_readable_fn readable;
    void *context;
} fd_watcher;

static gboolean fd_on_readable(gint fd, GIOCondition condition, gpointer data) {
    (void)condition;
    fd_watcher *watcher = data;
    watcher->readable(watcher->context, fd);
    return G_SOURCE_CONTINUE;
}

/// g_unix_fd_source_new (what g_unix_fd_add attaches to the default context) on the loop's own
/// context.
static void *glt_watch_fd(void *loop, int fd, raw_readable_fn readable, void *context) {
    fd_watcher *watcher = g_new(fd_watcher, 1);
    watcher->readable = readable;
    watcher->context = context;
    watcher->source = g_unix_fd_source_new(fd, G_IO_IN);
    g_source_set_callback(watcher->source, G_SOURCE_FUNC(fd_on_readable), watcher, NULL);
    g_source_attach(watcher->source, ((gl_loop *)loop)->context);
    return watcher;
}

static void glt_unwatch_fd(void *opaque) {
    fd_watcher *watcher = opaque;
    g_source_destroy(watcher->source);
    g_source_unref(watcher->source);
    g_free(watcher);
}

/// A timeout source every second, its first ready time moved to half a second from now.
static void *glt_tick_start(void *loop) {
    GSource *tick = g_timeout_source_new(1000);
    g_source_set_ready_time(tick, g_get_monotonic_time() + 500000);
    g_source_set_callback(tick, never_fires, NULL, NULL);
    g_source_attach(tick, ((gl_loop *)loop)->context);
    return tick;
}

static void glt_tick_stop(void *tick) {
    g_source_destroy(tick);
    g_source_unref(tick);
}

/// g_main_context_iteration returns.
static long long glt_loop_passes(void *loop) {
    return __atomic_load_n(&((gl_loop *)loop)->iterations, __ATOMIC_RELAXED);
}

// MARK: Memory

typedef struct {
    GMainContext *context;
    int count;
} timer_set;

static void *glt_timer_set_new(int count) {
    timer_set *set = calloc(1, sizeof *set);
    if (!set) return NULL;
    set->count = count;
    set->context = own_context();
    return set;
}

static void glt_timer_set_fill(void *opaque) {
    timer_set *set = opaque;
    for (int i = 0; i < set->count; i++) {
        g_source_unref(attach_timeout(set->context, hour_away_ms(i), never_fires, NULL));
    }
}

static void glt_timer_set_free(void *opaque) {
    timer_set *set = opaque;
    if (!set) return;
    free_context(set->context);
    free(set);
}

// MARK: The peer

static const char *glt_version(void) {
    static char version[32];
    snprintf(version, sizeof version, "%u.%u.%u", glib_major_version, glib_minor_version, glib_micro_version);
    return version;
}

static void *loop_start(void) { return gl_start(); }

static void loop_post(void *loop, raw_fn fn, void *context) { gl_post(loop, fn, context); }

static void loop_post_typical(void *loop, const raw_typical *values) { gl_post_typical(loop, values); }

static int loop_stop(void *loop) { return gl_stop(loop); }

static const raw_peer peer = {
    .loop = {loop_start, loop_post, loop_post_typical, loop_stop},
    .version = glt_version,
    .timers = glt_timers,
    .timer_churn = glt_churn,
    .items_at_scale = glt_items_at_scale,
    .schedule_cancel = glt_schedule_cancel,
    .iteration = glt_iteration,
    .watch_fd = glt_watch_fd,
    .unwatch_fd = glt_unwatch_fd,
    .tick_start = glt_tick_start,
    .tick_stop = glt_tick_stop,
    .loop_passes = glt_loop_passes,
    .timer_set_new = glt_timer_set_new,
    .timer_set_fill = glt_timer_set_fill,
    .timer_set_free = glt_timer_set_free,
    .sockets = &gls_socket_ops,
};

const raw_peer *raw_glib_peer(void) { return &peer; }
