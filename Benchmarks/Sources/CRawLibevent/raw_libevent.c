// The benchmark's workloads written directly on libevent 2.1: the floor RunLoopKit is measured
// against (include/raw_libevent.h). This file: the raw loops, descriptors and the peer's table;
// the timer and busy-loop workloads are in raw_libevent_workloads.c.

#define _GNU_SOURCE
// System headers before event2/*.h (Debian's event-config.h defines _GNU_SOURCE).
#include <sys/types.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "raw_libevent.h"
#include "raw_libevent_workloads.h"
#include "raw_peer_sockets.h"

int raw_libevent_version_ok(void) { return event_get_version_number() >= 0x02010000; }

const char *raw_libevent_version(void) { return event_get_version(); }

// MARK: Raw loops: a thread, an event_base, a queue of items and a coalescing eventfd

typedef struct raw_loop raw_loop;

typedef struct {
    raw_fn fn;
    void *context;
} raw_item;

struct raw_loop {
    struct event_base *base;
    struct event *wake_event;
    int wake_fd;
    pthread_mutex_t mutex;  // guards inbox, count, capacity, wake_pending
    raw_item *inbox;
    size_t count, capacity;
    raw_item *work;  // loop thread only: the batch being run
    size_t work_capacity;
    int wake_pending;
    int stop;                 // loop thread only
    long long iterations;     // event_base_loop returns (atomic)
    pthread_t thread;
    raw_latch ready, exited;
    int failed;
};

static void raw_loop_on_wake(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    raw_loop *loop = arg;
    uint64_t value;
    ssize_t got = read(fd, &value, sizeof value);
    (void)got;
    pthread_mutex_lock(&loop->mutex);
    loop->wake_pending = 0;
    raw_item *items = loop->inbox;
    size_t count = loop->count;
    size_t capacity = loop->capacity;
    loop->inbox = loop->work;
    loop->capacity = loop->work_capacity;
    loop->count = 0;
    loop->work = items;
    loop->work_capacity = capacity;
    pthread_mutex_unlock(&loop->mutex);
    for (size_t i = 0; i < count; i++) items[i].fn(items[i].context);
}

/// Queues `fn(loop, context)` to run on the loop's thread. Any thread. One eventfd write per batch.
static void raw_loop_post(raw_loop *loop, raw_fn fn, void *context) {
    pthread_mutex_lock(&loop->mutex);
    if (loop->count == loop->capacity) {
        size_t capacity = loop->capacity ? loop->capacity * 2 : 256;
        raw_item *grown = realloc(loop->inbox, capacity * sizeof(raw_item));
        if (!grown) abort();
        loop->inbox = grown;
        loop->capacity = capacity;
    }
    loop->inbox[loop->count].fn = fn;
    loop->inbox[loop->count].context = context;
    loop->count++;
    int wake = !loop->wake_pending;
    loop->wake_pending = 1;
    pthread_mutex_unlock(&loop->mutex);
    if (wake) {
        uint64_t one = 1;
        ssize_t put = write(loop->wake_fd, &one, sizeof one);
        (void)put;
    }
}

static void *raw_loop_main(void *arg) {
    raw_loop *loop = arg;
    loop->base = lev_new_base(0);
    if (loop->base) {
        loop->wake_event =
            event_new(loop->base, loop->wake_fd, EV_READ | EV_PERSIST, raw_loop_on_wake, loop);
    }
    if (!loop->base || !loop->wake_event || event_add(loop->wake_event, NULL) != 0) {
        loop->failed = 1;
        raw_latch_open(&loop->ready);
        raw_latch_open(&loop->exited);
        return NULL;
    }
    raw_latch_open(&loop->ready);
    while (!loop->stop) {
        event_base_loop(loop->base, EVLOOP_ONCE);
        __atomic_add_fetch(&loop->iterations, 1, __ATOMIC_RELAXED);
    }
    event_free(loop->wake_event);
    event_base_free(loop->base);
    raw_latch_open(&loop->exited);
    return NULL;
}

static void raw_loop_free(raw_loop *loop) {
    close(loop->wake_fd);
    free(loop->inbox);
    free(loop->work);
    pthread_mutex_destroy(&loop->mutex);
    raw_latch_destroy(&loop->ready);
    raw_latch_destroy(&loop->exited);
    free(loop);
}

/// Starts a loop thread and waits until its base exists. NULL on failure.
static raw_loop *raw_loop_start(void) {
    raw_loop *loop = calloc(1, sizeof *loop);
    if (!loop) return NULL;
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&loop->mutex, NULL);
    raw_latch_init(&loop->ready);
    raw_latch_init(&loop->exited);
    if (loop->wake_fd < 0) {
        free(loop);
        return NULL;
    }
    switch (raw_loop_thread_start(&loop->thread, raw_loop_main, loop, &loop->ready, &loop->failed)) {
    case raw_start_ok: return loop;
    case raw_start_timed_out: return NULL;
    case raw_start_not_created:
        close(loop->wake_fd);
        free(loop);
        return NULL;
    default: raw_loop_free(loop); return NULL;
    }
}

static int raw_loop_stop_item(void *context) {
    raw_loop *loop = context;
    loop->stop = 1;
    return 0;
}

/// Stops the loop after the items already queued, joins and frees it. 0 if it did not exit in time
/// (then it is leaked rather than freed under a running thread).
static int raw_loop_stop(raw_loop *loop) {
    if (!loop) return 1;
    raw_loop_post(loop, raw_loop_stop_item, loop);
    if (!raw_latch_wait(&loop->exited, 10.0)) {
        pthread_detach(loop->thread);
        return 0;
    }
    pthread_join(loop->thread, NULL);
    raw_loop_free(loop);
    return 1;
}

struct event_base *lev_loop_base(void *loop) { return ((raw_loop *)loop)->base; }

// MARK: Descriptors and the idle loop's timer (the workloads are CRawPeer's)

typedef struct {
    struct event *event;
    raw_readable_fn readable;
    void *context;
} fd_watcher;

static void fd_on_readable(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    fd_watcher *watcher = arg;
    watcher->readable(watcher->context, fd);
}

/// A persistent EV_READ event.
static void *lev_watch_fd(void *loop, int fd, raw_readable_fn readable, void *context) {
    fd_watcher *watcher = malloc(sizeof *watcher);
    if (!watcher) abort();
    watcher->readable = readable;
    watcher->context = context;
    watcher->event = event_new(((raw_loop *)loop)->base, fd, EV_READ | EV_PERSIST, fd_on_readable, watcher);
    event_add(watcher->event, NULL);
    return watcher;
}

static void lev_unwatch_fd(void *opaque) {
    fd_watcher *watcher = opaque;
    event_free(watcher->event);
    free(watcher);
}

static void idle_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    struct timeval second = {1, 0};
    event_add(*(struct event **)arg, &second);
}

/// A one-shot evtimer that adds itself again a second later.
static void *lev_tick_start(void *loop) {
    struct event **tick = malloc(sizeof *tick);
    if (!tick) abort();
    *tick = event_new(((raw_loop *)loop)->base, -1, 0, idle_tick, tick);
    struct timeval half = {0, 500000};
    event_add(*tick, &half);
    return tick;
}

static void lev_tick_stop(void *opaque) {
    struct event **tick = opaque;
    event_free(*tick);
    free(tick);
}

/// event_base_loop(EVLOOP_ONCE) returns.
static long long lev_loop_passes(void *loop) {
    return __atomic_load_n(&((raw_loop *)loop)->iterations, __ATOMIC_RELAXED);
}

// MARK: The peer

static void *loop_start(void) { return raw_loop_start(); }

static void loop_post(void *loop, raw_fn fn, void *context) { raw_loop_post(loop, fn, context); }

static int typical_item(void *context) {
    raw_typical_run(context);
    free(context);
    return 0;
}

/// The item's context is a malloc'd copy of the values, freed on the loop thread.
static void loop_post_typical(void *loop, const raw_typical *values) {
    raw_typical *copy = malloc(sizeof *copy);
    if (!copy) abort();
    *copy = *values;
    raw_loop_post(loop, typical_item, copy);
}

static int loop_stop(void *loop) { return raw_loop_stop(loop); }

static const raw_peer peer = {
    .loop = {loop_start, loop_post, loop_post_typical, loop_stop},
    .version = raw_libevent_version,
    .timers = lev_timers,
    .timer_churn = lev_timer_churn,
    .items_at_scale = lev_items_at_scale,
    .schedule_cancel = lev_schedule_cancel,
    .iteration = lev_iteration,
    .watch_fd = lev_watch_fd,
    .unwatch_fd = lev_unwatch_fd,
    .tick_start = lev_tick_start,
    .tick_stop = lev_tick_stop,
    .loop_passes = lev_loop_passes,
    .timer_set_new = lev_timer_set_new,
    .timer_set_fill = lev_timer_set_fill,
    .timer_set_free = lev_timer_set_free,
    .sockets = &lev_socket_ops,
};

const raw_peer *raw_libevent_peer(void) { return &peer; }
