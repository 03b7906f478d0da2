// The benchmark's workloads on libuv (include/raw_libuv.h); the cross-thread loop is in
// raw_libuv_loop.c, posts and ping-pong in CRawPeer.

#define _GNU_SOURCE
#include <stdlib.h>

#include "raw_libuv.h"
#include "raw_libuv_loop.h"
#include "raw_libuv_sockets.h"

static void close_handle(uv_handle_t *handle, void *arg) {
    (void)arg;
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

static void free_handle(uv_handle_t *handle) { free(handle); }

/// Closes every handle still open on `loop`, runs their close callbacks and closes the loop.
static void close_loop(uv_loop_t *loop) {
    uv_walk(loop, close_handle, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
}

// MARK: Timers, scheduling cost and lateness

typedef struct {
    uv_timer_t handle;
    double due;
    int index;
} uvt_timer;

typedef struct {
    double *lateness_us;
    int count;
    int fired;
} uvt_state;

static void timer_fired(uv_timer_t *handle) {
    double now = raw_mono_now();
    uvt_timer *timer = (uvt_timer *)handle;
    uvt_state *state = handle->loop->data;
    state->lateness_us[timer->index] = (now - timer->due) * 1e6;
    uv_close((uv_handle_t *)handle, NULL);
    if (++state->fired == state->count) uv_stop(handle->loop);
}

static void timers_give_up(uv_timer_t *handle) { uv_stop(handle->loop); }

static raw_timers_result uvt_timers(int count, const double *offsets, double lead_seconds, double *lateness_us,
                                    double timeout_seconds) {
    raw_timers_result result = {0, 0, 0, 0};
    if (count < 1) return result;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return result;
    uvt_timer *timers = calloc((size_t)count, sizeof *timers);
    if (!timers) abort();
    uvt_state state = {.lateness_us = lateness_us, .count = count};
    loop.data = &state;
    uv_update_time(&loop);
    double first = raw_mono_now() + lead_seconds;
    double last_offset = 0;
    for (int i = 0; i < count; i++) {
        timers[i].due = first + offsets[i];
        timers[i].index = i;
        if (offsets[i] > last_offset) last_offset = offsets[i];
    }

    double start = raw_mono_now();
    for (int i = 0; i < count; i++) {
        uv_timer_init(&loop, &timers[i].handle);
        uv_timer_start(&timers[i].handle, timer_fired, uvl_delay_ms(&loop, timers[i].due), 0);
    }
    double end = raw_mono_now();

    uv_timer_t give_up;
    uv_timer_init(&loop, &give_up);
    uv_timer_start(&give_up, timers_give_up, uvl_delay_ms(&loop, first + last_offset + timeout_seconds), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    close_loop(&loop);
    free(timers);

    return raw_timers_outcome(state.fired, count, start, end, first);
}

// MARK: Timer churn

static void never_fires(uv_timer_t *handle) { (void)handle; }

/// An hour away, jittered so that the heap is not fed in order (libuv's timeouts are milliseconds).
static uint64_t hour_away_ms(long long index) { return 3600 * 1000 + (uint64_t)((index * 7919) % 1000000) / 1000; }

static raw_churn_result uvt_churn(long long timers, int window) {
    raw_churn_result result = {0, 0};
    if (timers < 1 || window < 1) return result;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return result;
    uv_timer_t **ring = calloc((size_t)window, sizeof *ring);
    if (!ring) abort();
    double start = raw_mono_now();
    for (long long i = 0; i < timers; i++) {
        uv_timer_t *timer = malloc(sizeof *timer);
        if (!timer) abort();
        uv_timer_init(&loop, timer);
        uv_timer_start(timer, never_fires, hour_away_ms(i), 0);
        size_t slot = (size_t)(i % window);
        // uv_close stops the timer; the handle is freed by its close callback, which runs on the
        // loop's next pass.
        if (ring[slot]) uv_close((uv_handle_t *)ring[slot], free_handle);
        ring[slot] = timer;
        if (slot == (size_t)window - 1) uv_run(&loop, UV_RUN_NOWAIT);
    }
    for (int slot = 0; slot < window; slot++) {
        if (ring[slot]) uv_close((uv_handle_t *)ring[slot], free_handle);
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    double end = raw_mono_now();
    free(ring);
    close_loop(&loop);
    result.ok = 1;
    result.seconds = end - start;
    return result;
}

// MARK: Items at scale

static raw_churn_result uvt_items_at_scale(int count, const int32_t *removal_order, int sources) {
    raw_churn_result result = {0, 0};
    if (count < 1) return result;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return result;
    double start, end;
    if (sources) {
        // libuv has no custom event sources: a uv_async_t is a handle of the loop that waits for
        // a signal, and uv_async_init is its add.
        uv_async_t *asyncs = calloc((size_t)count, sizeof *asyncs);
        if (!asyncs) abort();
        // Measured: uv_async_init of every handle, then uv_close of each in the removal order, and
        // the pass that runs their close callbacks.
        start = raw_mono_now();
        for (int i = 0; i < count; i++) uv_async_init(&loop, &asyncs[i], NULL);
        for (int i = 0; i < count; i++) uv_close((uv_handle_t *)&asyncs[removal_order[i]], NULL);
        uv_run(&loop, UV_RUN_NOWAIT);
        end = raw_mono_now();
        close_loop(&loop);
        free(asyncs);
    } else {
        uv_timer_t *timers = calloc((size_t)count, sizeof *timers);
        if (!timers) abort();
        // Initialised before the clock starts, closed after it stops.
        for (int i = 0; i < count; i++) uv_timer_init(&loop, &timers[i]);
        // Measured: uv_timer_start of every timer (an hour away, jittered as in the churn), then
        // uv_timer_stop of each in the removal order.
        start = raw_mono_now();
        for (int i = 0; i < count; i++) uv_timer_start(&timers[i], never_fires, hour_away_ms(i), 0);
        for (int i = 0; i < count; i++) uv_timer_stop(&timers[removal_order[i]]);
        end = raw_mono_now();
        close_loop(&loop);
        free(timers);
    }
    result.ok = 1;
    result.seconds = end - start;
    return result;
}

// MARK: Scheduled blocks: schedule and cancel

/// Fired blocks of the run in progress (runs are one at a time, on one thread).
static long long blocks_fired;

static void block_fired(uv_timer_t *timer) {
    blocks_fired++;
    uv_close((uv_handle_t *)timer, free_handle);  // a one-shot block is released as it runs
}

static raw_churn_result uvt_schedule_cancel(long long blocks, int fire_half) {
    raw_churn_result result = {0, 0};
    if (blocks < 1) return result;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return result;
    blocks_fired = 0;
    long long firing = 0;
    double start = raw_mono_now();
    for (long long i = 0; i < blocks; i++) {
        uv_timer_t *timer = malloc(sizeof *timer);
        if (!timer) abort();
        uv_timer_init(&loop, timer);
        uv_timer_start(timer, block_fired, fire_half ? 0 : 3600 * 1000, 0);
        if (fire_half && (i & 1)) {
            firing++;
            continue;
        }
        uv_close((uv_handle_t *)timer, free_handle);
        // Close callbacks run on the loop's next pass: as in the churn, one every 1,000 timers.
        if (!fire_half && i % 1000 == 999) uv_run(&loop, UV_RUN_NOWAIT);
    }
    // Runs the fired ones, then the close callbacks, until no handle is left.
    uv_run(&loop, UV_RUN_DEFAULT);
    double end = raw_mono_now();
    close_loop(&loop);
    result.ok = blocks_fired == firing;
    result.seconds = end - start;
    return result;
}

// MARK: Iteration overhead

typedef struct {
    double deadline;
    long long performed;
    long long observer_calls;
} busy_state;

static void busy_perform(uv_idle_t *handle) {
    busy_state *state = handle->data;
    if ((++state->performed & 255) == 0 && raw_mono_now() >= state->deadline) uv_stop(handle->loop);
}

static void busy_before(uv_prepare_t *handle) { ((busy_state *)handle->data)->observer_calls++; }

static void busy_after(uv_check_t *handle) { ((busy_state *)handle->data)->observer_calls++; }

static raw_iteration_result uvt_iteration(double seconds, int observers) {
    raw_iteration_result result = {0, 0, 0, 0};
    if (observers < 0 || observers > 16) return result;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return result;
    busy_state state = {0, 0, 0};
    // The same descriptor a cross-thread loop keeps registered: the poll is not of an empty set.
    uv_async_t wake;
    uv_async_init(&loop, &wake, NULL);
    uv_idle_t busy;
    uv_idle_init(&loop, &busy);
    busy.data = &state;
    uv_idle_start(&busy, busy_perform);
    uv_prepare_t before[16];
    uv_check_t after[16];
    for (int o = 0; o < observers; o++) {
        uv_prepare_init(&loop, &before[o]);
        before[o].data = &state;
        uv_prepare_start(&before[o], busy_before);
        uv_check_init(&loop, &after[o]);
        after[o].data = &state;
        uv_check_start(&after[o], busy_after);
    }
    double start = raw_mono_now();
    state.deadline = start + seconds;
    uv_run(&loop, UV_RUN_DEFAULT);
    double end = raw_mono_now();
    close_loop(&loop);
    result.ok = 1;
    result.seconds = end - start;
    result.iterations = state.performed;
    result.observer_calls = state.observer_calls;
    return result;
}

// MARK: Descriptors and the idle loop's timer (the workloads are CRawPeer's)

typedef struct {
    uv_poll_t poll;
    raw_readable_fn readable;
    void *context;
    int fd;
} fd_watcher;

static void fd_on_readable(uv_poll_t *handle, int status, int events) {
    (void)events;
    fd_watcher *watcher = (fd_watcher *)handle;
    if (status >= 0) watcher->readable(watcher->context, watcher->fd);
}

/// A uv_poll_t watching for UV_READABLE.
static void *uvt_watch_fd(void *loop, int fd, raw_readable_fn readable, void *context) {
    fd_watcher *watcher = malloc(sizeof *watcher);
    if (!watcher) abort();
    watcher->readable = readable;
    watcher->context = context;
    watcher->fd = fd;
    uv_poll_init(&((uvl_loop *)loop)->uv, &watcher->poll, fd);
    uv_poll_start(&watcher->poll, UV_READABLE, fd_on_readable);
    return watcher;
}

/// uv_close stops the handle; its close callback frees it on the loop's next pass.
static void uvt_unwatch_fd(void *watcher) { uv_close(watcher, free_handle); }

static void idle_tick(uv_timer_t *handle) { (void)handle; }

/// A repeating uv_timer_t.
static void *uvt_tick_start(void *loop) {
    uv_timer_t *tick = malloc(sizeof *tick);
    if (!tick) abort();
    uv_timer_init(&((uvl_loop *)loop)->uv, tick);
    uv_timer_start(tick, idle_tick, 500, 1000);
    return tick;
}

static void uvt_tick_stop(void *tick) { uv_close(tick, free_handle); }

/// uv_run(UV_RUN_ONCE) returns.
static long long uvt_loop_passes(void *loop) {
    return __atomic_load_n(&((uvl_loop *)loop)->iterations, __ATOMIC_RELAXED);
}

// MARK: Memory

typedef struct {
    uv_loop_t loop;
    int count;
} timer_set;

static void *uvt_timer_set_new(int count) {
    timer_set *set = calloc(1, sizeof *set);
    if (!set) return NULL;
    set->count = count;
    if (uv_loop_init(&set->loop) != 0) {
        free(set);
        return NULL;
    }
    return set;
}

static void uvt_timer_set_fill(void *opaque) {
    timer_set *set = opaque;
    for (int i = 0; i < set->count; i++) {
        uv_timer_t *timer = malloc(sizeof *timer);
        if (!timer) abort();
        uv_timer_init(&set->loop, timer);
        uv_timer_start(timer, never_fires, hour_away_ms(i), 0);
    }
}

static void close_and_free(uv_handle_t *handle, void *arg) {
    (void)arg;
    if (!uv_is_closing(handle)) uv_close(handle, free_handle);
}

static void uvt_timer_set_free(void *opaque) {
    timer_set *set = opaque;
    if (!set) return;
    uv_walk(&set->loop, close_and_free, NULL);
    uv_run(&set->loop, UV_RUN_DEFAULT);
    uv_loop_close(&set->loop);
    free(set);
}

// MARK: The peer

static void *loop_start(void) { return uvl_start(); }

static void loop_post(void *loop, raw_fn fn, void *context) { uvl_post(loop, fn, context); }

static void loop_post_typical(void *loop, const raw_typical *values) { uvl_post_typical(loop, values); }

static int loop_stop(void *loop) { return uvl_stop(loop); }

static const raw_peer peer = {
    .loop = {loop_start, loop_post, loop_post_typical, loop_stop},
    .version = uv_version_string,
    .timers = uvt_timers,
    .timer_churn = uvt_churn,
    .items_at_scale = uvt_items_at_scale,
    .schedule_cancel = uvt_schedule_cancel,
    .iteration = uvt_iteration,
    .watch_fd = uvt_watch_fd,
    .unwatch_fd = uvt_unwatch_fd,
    .tick_start = uvt_tick_start,
    .tick_stop = uvt_tick_stop,
    .loop_passes = uvt_loop_passes,
    .timer_set_new = uvt_timer_set_new,
    .timer_set_fill = uvt_timer_set_fill,
    .timer_set_free = uvt_timer_set_free,
    .sockets = &uvs_socket_ops,
};

const raw_peer *raw_libuv_peer(void) { return &peer; }
