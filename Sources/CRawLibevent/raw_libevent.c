// The benchmark's workloads written directly on libevent 2.1: the floor RunLoopKit is measured
// against. See include/raw_libevent.h for what each function does.

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

// MARK: Helpers

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct timeval timeval_from(double seconds) {
    if (seconds < 0) seconds = 0;
    struct timeval tv;
    tv.tv_sec = (time_t)seconds;
    // Rounded up to the next microsecond: a timer must never be asked to fire early.
    long usec = (long)((seconds - (double)tv.tv_sec) * 1e6 + 0.999);
    if (usec >= 1000000) {
        tv.tv_sec += 1;
        usec -= 1000000;
    }
    tv.tv_usec = usec;
    return tv;
}

static struct event_base *new_base(int precise) {
    struct event_config *config = event_config_new();
    if (!config) return NULL;
    event_config_set_flag(config, EVENT_BASE_FLAG_NOLOCK);
    if (precise) event_config_set_flag(config, EVENT_BASE_FLAG_PRECISE_TIMER);
    struct event_base *base = event_base_new_with_config(config);
    event_config_free(config);
    return base;
}

/// A one-shot flag with a timed wait (CLOCK_MONOTONIC).
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int open;
} latch;

static void latch_init(latch *l) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&l->mutex, NULL);
    l->open = 0;
}

static void latch_destroy(latch *l) {
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->mutex);
}

static void latch_open(latch *l) {
    pthread_mutex_lock(&l->mutex);
    l->open = 1;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->mutex);
}

/// Returns 1 once open, 0 if `timeout` seconds passed first.
static int latch_wait(latch *l, double timeout) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = (double)(long long)timeout;
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((timeout - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mutex);
    while (!l->open) {
        if (pthread_cond_timedwait(&l->cond, &l->mutex, &deadline) == ETIMEDOUT) break;
    }
    int open = l->open;
    pthread_mutex_unlock(&l->mutex);
    return open;
}

int raw_libevent_version_ok(void) { return event_get_version_number() >= 0x02010000; }

const char *raw_libevent_version(void) { return event_get_version(); }

long long raw_rss_bytes(void) {
    FILE *file = fopen("/proc/self/statm", "r");
    if (!file) return -1;
    long long size = 0, resident = 0;
    int fields = fscanf(file, "%lld %lld", &size, &resident);
    fclose(file);
    if (fields != 2) return -1;
    return resident * (long long)sysconf(_SC_PAGESIZE);
}

void raw_malloc_trim(void) { malloc_trim(0); }

// MARK: Raw loops: a thread, an event_base, a queue of items and a coalescing eventfd

typedef struct raw_loop raw_loop;
typedef void (*raw_fn)(raw_loop *loop, void *context);

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
    latch ready, exited;
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
    for (size_t i = 0; i < count; i++) items[i].fn(loop, items[i].context);
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
    loop->base = new_base(0);
    if (loop->base) {
        loop->wake_event =
            event_new(loop->base, loop->wake_fd, EV_READ | EV_PERSIST, raw_loop_on_wake, loop);
    }
    if (!loop->base || !loop->wake_event || event_add(loop->wake_event, NULL) != 0) {
        loop->failed = 1;
        latch_open(&loop->ready);
        latch_open(&loop->exited);
        return NULL;
    }
    latch_open(&loop->ready);
    while (!loop->stop) {
        event_base_loop(loop->base, EVLOOP_ONCE);
        __atomic_add_fetch(&loop->iterations, 1, __ATOMIC_RELAXED);
    }
    event_free(loop->wake_event);
    event_base_free(loop->base);
    latch_open(&loop->exited);
    return NULL;
}

static void raw_loop_free(raw_loop *loop) {
    close(loop->wake_fd);
    free(loop->inbox);
    free(loop->work);
    pthread_mutex_destroy(&loop->mutex);
    latch_destroy(&loop->ready);
    latch_destroy(&loop->exited);
    free(loop);
}

/// Starts a loop thread and waits until its base exists. NULL on failure.
static raw_loop *raw_loop_start(void) {
    raw_loop *loop = calloc(1, sizeof *loop);
    if (!loop) return NULL;
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&loop->mutex, NULL);
    latch_init(&loop->ready);
    latch_init(&loop->exited);
    if (loop->wake_fd < 0 || pthread_create(&loop->thread, NULL, raw_loop_main, loop) != 0) {
        if (loop->wake_fd >= 0) close(loop->wake_fd);
        loop->wake_fd = -1;
        free(loop);
        return NULL;
    }
    if (!latch_wait(&loop->ready, 10.0)) {
        pthread_detach(loop->thread);  // leaked: never touched again
        return NULL;
    }
    if (loop->failed) {
        pthread_join(loop->thread, NULL);
        raw_loop_free(loop);
        return NULL;
    }
    return loop;
}

static void raw_loop_stop_item(raw_loop *loop, void *context) {
    (void)context;
    loop->stop = 1;
}

/// Stops the loop after the items already queued, joins and frees it. 0 if it did not exit in time
/// (then it is leaked rather than freed under a running thread).
static int raw_loop_stop(raw_loop *loop) {
    if (!loop) return 1;
    raw_loop_post(loop, raw_loop_stop_item, NULL);
    if (!latch_wait(&loop->exited, 10.0)) {
        pthread_detach(loop->thread);
        return 0;
    }
    pthread_join(loop->thread, NULL);
    raw_loop_free(loop);
    return 1;
}

// MARK: Workload 1: cross-thread post throughput

typedef struct {
    long long target;
    long long count;  // loop thread only
    double end;
    latch done;
} post_state;

static void post_item(raw_loop *loop, void *context) {
    (void)loop;
    post_state *state = context;
    if (++state->count == state->target) {
        state->end = mono_now();
        latch_open(&state->done);
    }
}

typedef struct {
    raw_loop *loop;
    post_state *state;
    long long blocks;
    pthread_barrier_t *barrier;
    int cpu;
    int pinned;
    double started;
} producer_args;

static void *producer_main(void *arg) {
    producer_args *args = arg;
    args->pinned = args->cpu < 0 || raw_pin_thread(args->cpu);
    pthread_barrier_wait(args->barrier);
    args->started = mono_now();
    for (long long i = 0; i < args->blocks; i++) raw_loop_post(args->loop, post_item, args->state);
    return NULL;
}

typedef struct {
    int cpu;
    int pinned;
    latch done;
} pin_request;

static void pin_item(raw_loop *loop, void *context) {
    (void)loop;
    pin_request *request = context;
    request->pinned = raw_pin_thread(request->cpu);
    latch_open(&request->done);
}

raw_post_result raw_post_throughput(
    int producers, long long blocks, double timeout_seconds, int loop_cpu, int producer_cpu) {
    raw_post_result result = {0, 0, 0};
    if (producers < 1 || producers > 64 || blocks < producers) return result;
    // On the heap: if a loop thread fails to stop it may still use it, and it is then leaked.
    post_state *state = calloc(1, sizeof *state);
    if (!state) return result;
    state->target = blocks;
    latch_init(&state->done);
    raw_loop *loop = raw_loop_start();
    if (!loop) {
        free(state);
        return result;
    }
    if (loop_cpu >= 0) {
        // On the heap, like `state`: leaked if the loop never runs the item.
        pin_request *request = calloc(1, sizeof *request);
        if (!request) abort();
        request->cpu = loop_cpu;
        latch_init(&request->done);
        raw_loop_post(loop, pin_item, request);
        int ran = latch_wait(&request->done, 10.0);
        int pinned = ran && request->pinned;
        if (ran) {
            latch_destroy(&request->done);
            free(request);
        }
        if (!pinned) {
            if (raw_loop_stop(loop)) {
                latch_destroy(&state->done);
                free(state);
            }
            return result;
        }
    }
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)producers + 1);
    pthread_t threads[64];
    producer_args args[64];
    for (int p = 0; p < producers; p++) {
        args[p].loop = loop;
        args[p].state = state;
        args[p].blocks = blocks / producers + (p == 0 ? blocks % producers : 0);
        args[p].barrier = &barrier;
        args[p].cpu = producer_cpu;
        args[p].pinned = 0;
        if (pthread_create(&threads[p], NULL, producer_main, &args[p]) != 0) abort();
    }
    pthread_barrier_wait(&barrier);
    int done = latch_wait(&state->done, timeout_seconds);
    for (int p = 0; p < producers; p++) pthread_join(threads[p], NULL);
    // The clock starts when the first producer leaves the start line (on two cores the measuring
    // thread may not run again until the producers are done).
    double start = args[0].started;
    for (int p = 1; p < producers; p++) {
        if (args[p].started < start) start = args[p].started;
    }
    pthread_barrier_destroy(&barrier);
    // The stop item runs after every block, so `state` outlives its last use.
    if (!raw_loop_stop(loop)) return result;
    int pinned = 1;
    for (int p = 0; p < producers; p++) pinned = pinned && args[p].pinned;
    result.ok = done && pinned;
    result.seconds = state->end - start;
    result.count = state->count;
    latch_destroy(&state->done);
    free(state);
    return result;
}

// MARK: Workload 2: ping-pong latency between two raw loops

typedef struct {
    raw_loop *a, *b;
    int round_trips;
    int completed;  // loop A only
    int cancelled;  // loop A only: set after a timeout so that no new round trip starts
    double start;   // loop A only
    double *rtt_us;
    latch done, cancel_seen;
} pingpong_state;

static void pingpong_ping(raw_loop *loop, void *context);

static void pingpong_back(raw_loop *loop, void *context) {
    pingpong_state *state = context;
    if (state->cancelled) return;
    state->rtt_us[state->completed++] = (mono_now() - state->start) * 1e6;
    if (state->completed < state->round_trips) {
        pingpong_ping(loop, context);
    } else {
        latch_open(&state->done);
    }
}

static void pingpong_pong(raw_loop *loop, void *context) {
    (void)loop;
    pingpong_state *state = context;
    raw_loop_post(state->a, pingpong_back, state);
}

static void pingpong_cancel(raw_loop *loop, void *context) {
    (void)loop;
    pingpong_state *state = context;
    state->cancelled = 1;
    latch_open(&state->cancel_seen);
}

static void pingpong_ping(raw_loop *loop, void *context) {
    (void)loop;
    pingpong_state *state = context;
    state->start = mono_now();
    raw_loop_post(state->b, pingpong_pong, state);
}

raw_pingpong_result raw_pingpong(int round_trips, double *rtt_us, double timeout_seconds) {
    raw_pingpong_result result = {0, 0};
    if (round_trips < 1) return result;
    pingpong_state *state = calloc(1, sizeof *state);  // leaked if a loop fails to stop
    if (!state) return result;
    state->round_trips = round_trips;
    state->rtt_us = rtt_us;
    latch_init(&state->done);
    latch_init(&state->cancel_seen);
    state->a = raw_loop_start();
    state->b = raw_loop_start();
    if (!state->a || !state->b) {
        raw_loop_stop(state->a);
        raw_loop_stop(state->b);
        return result;
    }
    raw_loop_post(state->a, pingpong_ping, state);
    int done = latch_wait(&state->done, timeout_seconds);
    // After a timeout a round trip may still be in flight: A stops starting new ones, then B (which
    // may still post back to A) stops before A.
    raw_loop_post(state->a, pingpong_cancel, state);
    if (!latch_wait(&state->cancel_seen, 10.0)) return result;
    int stopped = raw_loop_stop(state->b);
    stopped &= raw_loop_stop(state->a);
    if (!stopped) return result;
    result.ok = done;
    result.completed = done ? state->completed : 0;
    latch_destroy(&state->done);
    latch_destroy(&state->cancel_seen);
    free(state);
    return result;
}

// MARK: Workload 3: timers, scheduling cost and lateness

typedef struct timers_state timers_state;

typedef struct {
    timers_state *state;
    struct event *event;
    double due;
    int index;
} timer_context;

struct timers_state {
    struct event_base *base;
    double *lateness_us;
    int count;
    int fired;
};

static void timer_fired(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    double now = mono_now();
    timer_context *timer = arg;
    timers_state *state = timer->state;
    state->lateness_us[timer->index] = (now - timer->due) * 1e6;
    event_free(timer->event);
    timer->event = NULL;
    if (++state->fired == state->count) event_base_loopbreak(state->base);
}

static void timers_give_up(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

raw_timers_result raw_timers(int count, const double *offsets, double lead_seconds, double *lateness_us,
                             double timeout_seconds) {
    raw_timers_result result = {0, 0, 0, 0};
    if (count < 1) return result;
    struct event_base *base = new_base(1);
    if (!base) return result;
    timer_context *timers = calloc((size_t)count, sizeof *timers);
    if (!timers) {
        event_base_free(base);
        return result;
    }
    timers_state state = {.base = base, .lateness_us = lateness_us, .count = count};
    double first = mono_now() + lead_seconds;
    double last_offset = 0;
    for (int i = 0; i < count; i++) {
        timers[i].state = &state;
        timers[i].due = first + offsets[i];
        timers[i].index = i;
        if (offsets[i] > last_offset) last_offset = offsets[i];
    }

    double start = mono_now();
    for (int i = 0; i < count; i++) {
        struct event *event = event_new(base, -1, 0, timer_fired, &timers[i]);
        timers[i].event = event;
        struct timeval delay = timeval_from(timers[i].due - mono_now());
        event_add(event, &delay);
    }
    double end = mono_now();

    struct event *give_up = event_new(base, -1, 0, timers_give_up, base);
    struct timeval limit = timeval_from(first + last_offset + timeout_seconds - mono_now());
    event_add(give_up, &limit);
    event_base_dispatch(base);
    event_free(give_up);
    for (int i = 0; i < count; i++) {
        if (timers[i].event) event_free(timers[i].event);
    }
    event_base_free(base);
    free(timers);

    result.ok = state.fired == count;
    result.fired = state.fired;
    result.schedule_seconds = end - start;
    result.schedule_end_offset = end - first;
    return result;
}

// MARK: Workload 4: timer churn

static void never_fires(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
}

raw_churn_result raw_timer_churn(long long timers, int window) {
    raw_churn_result result = {0, 0};
    if (timers < 1 || window < 1) return result;
    struct event_base *base = new_base(1);
    if (!base) return result;
    struct event **ring = calloc((size_t)window, sizeof *ring);
    if (!ring) {
        event_base_free(base);
        return result;
    }
    double start = mono_now();
    for (long long i = 0; i < timers; i++) {
        struct event *event = event_new(base, -1, 0, never_fires, NULL);
        // An hour away, jittered so that the heap is not fed in order.
        struct timeval delay = {3600, (suseconds_t)((i * 7919) % 1000000)};
        event_add(event, &delay);
        size_t slot = (size_t)(i % window);
        if (ring[slot]) event_free(ring[slot]);  // event_free deletes a pending event first
        ring[slot] = event;
    }
    for (int slot = 0; slot < window; slot++) {
        if (ring[slot]) event_free(ring[slot]);
    }
    double end = mono_now();
    free(ring);
    event_base_free(base);
    result.ok = 1;
    result.seconds = end - start;
    return result;
}

// MARK: Workload 5: iteration overhead

typedef struct {
    struct event_base *base;
    struct event *event;
    long long performed;
} busy_state;

static void busy_perform(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    busy_state *state = arg;
    state->performed++;
    // Re-signal, and end this pass: the next one polls the kernel again, as a run-loop pass does.
    event_active(state->event, EV_TIMEOUT, 1);
    event_base_loopbreak(state->base);
}

static long long observer_calls;

static void observer_callout(int activity) {
    (void)activity;
    observer_calls++;
}

// Called through a volatile table so that the calls are real calls, as a run loop's are.
static void (*volatile observer_table[16])(int) = {
    observer_callout, observer_callout, observer_callout, observer_callout,
    observer_callout, observer_callout, observer_callout, observer_callout,
    observer_callout, observer_callout, observer_callout, observer_callout,
    observer_callout, observer_callout, observer_callout, observer_callout,
};

raw_iteration_result raw_iteration(double seconds, int observers) {
    raw_iteration_result result = {0, 0, 0, 0};
    if (observers < 0 || observers > 16) return result;
    struct event_base *base = new_base(0);
    if (!base) return result;
    // The same descriptor a cross-thread loop keeps registered: the poll is not of an empty set.
    int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct event *wake = event_new(base, wake_fd, EV_READ | EV_PERSIST, never_fires, NULL);
    event_add(wake, NULL);
    busy_state state = {.base = base};
    state.event = event_new(base, -1, 0, busy_perform, &state);
    event_active(state.event, EV_TIMEOUT, 1);
    observer_calls = 0;

    double start = mono_now();
    double deadline = start + seconds;
    for (long long pass = 1;; pass++) {
        for (int o = 0; o < observers; o++) observer_table[o](1);  // before timers
        for (int o = 0; o < observers; o++) observer_table[o](2);  // before sources
        event_base_loop(base, EVLOOP_NONBLOCK);
        if ((pass & 255) == 0 && mono_now() >= deadline) break;
    }
    double end = mono_now();

    event_free(state.event);
    event_free(wake);
    close(wake_fd);
    event_base_free(base);
    result.ok = 1;
    result.seconds = end - start;
    result.iterations = state.performed;
    result.observer_calls = observer_calls;
    return result;
}

// MARK: Workload 6: descriptor ping-pong over a socketpair

typedef struct {
    int fds[2];
    raw_loop *a, *b;
    struct event *event_a, *event_b;
    int round_trips;
    int completed;  // loop A only
    double end;
    latch added_a, added_b, removed_a, removed_b, done;
} fd_state;

static void fd_on_a(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    fd_state *state = arg;
    char byte;
    if (read(fd, &byte, 1) != 1) return;
    if (++state->completed < state->round_trips) {
        ssize_t put = write(fd, &byte, 1);
        (void)put;
    } else {
        state->end = mono_now();
        latch_open(&state->done);
    }
}

static void fd_on_b(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    (void)arg;
    char byte;
    if (read(fd, &byte, 1) != 1) return;
    ssize_t put = write(fd, &byte, 1);
    (void)put;
}

static void fd_add_a(raw_loop *loop, void *context) {
    fd_state *state = context;
    state->event_a = event_new(loop->base, state->fds[0], EV_READ | EV_PERSIST, fd_on_a, state);
    event_add(state->event_a, NULL);
    latch_open(&state->added_a);
}

static void fd_add_b(raw_loop *loop, void *context) {
    fd_state *state = context;
    state->event_b = event_new(loop->base, state->fds[1], EV_READ | EV_PERSIST, fd_on_b, state);
    event_add(state->event_b, NULL);
    latch_open(&state->added_b);
}

static void fd_remove_a(raw_loop *loop, void *context) {
    (void)loop;
    fd_state *state = context;
    event_free(state->event_a);
    latch_open(&state->removed_a);
}

static void fd_remove_b(raw_loop *loop, void *context) {
    (void)loop;
    fd_state *state = context;
    event_free(state->event_b);
    latch_open(&state->removed_b);
}

raw_fd_result raw_fd_pingpong(int round_trips, double timeout_seconds) {
    raw_fd_result result = {0, 0, 0};
    if (round_trips < 1) return result;
    fd_state *state = calloc(1, sizeof *state);  // leaked if a loop fails to stop
    if (!state) return result;
    state->round_trips = round_trips;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, state->fds) != 0) {
        free(state);
        return result;
    }
    latch_init(&state->added_a);
    latch_init(&state->added_b);
    latch_init(&state->removed_a);
    latch_init(&state->removed_b);
    latch_init(&state->done);
    state->a = raw_loop_start();
    state->b = raw_loop_start();
    int ok = state->a && state->b;
    if (ok) {
        raw_loop_post(state->a, fd_add_a, state);
        raw_loop_post(state->b, fd_add_b, state);
        ok = latch_wait(&state->added_a, 5.0) && latch_wait(&state->added_b, 5.0);
    }
    double start = mono_now();
    if (ok) {
        char byte = 'x';
        ok = write(state->fds[0], &byte, 1) == 1;
    }
    if (ok) ok = latch_wait(&state->done, timeout_seconds);
    if (state->a && state->event_a) raw_loop_post(state->a, fd_remove_a, state);
    if (state->b && state->event_b) raw_loop_post(state->b, fd_remove_b, state);
    int stopped = raw_loop_stop(state->a);
    stopped &= raw_loop_stop(state->b);
    if (!stopped) return result;
    close(state->fds[0]);
    close(state->fds[1]);
    result.ok = ok;
    result.seconds = state->end - start;
    result.round_trips = state->completed;
    latch_destroy(&state->added_a);
    latch_destroy(&state->added_b);
    latch_destroy(&state->removed_a);
    latch_destroy(&state->removed_b);
    latch_destroy(&state->done);
    free(state);
    return result;
}

// MARK: Workload 7: idle wake-ups

typedef struct {
    raw_loop *loop;
    struct event *tick;
    int with_timer;
    latch added, removed;
} idle_state;

static void idle_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    idle_state *state = arg;
    struct timeval second = {1, 0};
    event_add(state->tick, &second);
}

static void idle_add(raw_loop *loop, void *context) {
    idle_state *state = context;
    state->tick = event_new(loop->base, -1, 0, idle_tick, state);
    struct timeval half = {0, 500000};
    event_add(state->tick, &half);
    latch_open(&state->added);
}

static void idle_remove(raw_loop *loop, void *context) {
    (void)loop;
    idle_state *state = context;
    event_free(state->tick);
    latch_open(&state->removed);
}

void *raw_idle_start(int with_timer) {
    idle_state *state = calloc(1, sizeof *state);
    if (!state) return NULL;
    state->with_timer = with_timer;
    latch_init(&state->added);
    latch_init(&state->removed);
    state->loop = raw_loop_start();
    if (!state->loop) {
        free(state);
        return NULL;
    }
    if (with_timer) {
        raw_loop_post(state->loop, idle_add, state);
        if (!latch_wait(&state->added, 5.0)) {
            raw_loop_stop(state->loop);
            return NULL;
        }
    }
    return state;
}

long long raw_idle_wakeups(void *idle) {
    idle_state *state = idle;
    return __atomic_load_n(&state->loop->iterations, __ATOMIC_RELAXED);
}

int raw_idle_stop(void *idle) {
    idle_state *state = idle;
    if (state->with_timer) raw_loop_post(state->loop, idle_remove, state);
    int stopped = raw_loop_stop(state->loop);
    if (!stopped) return 0;
    latch_destroy(&state->added);
    latch_destroy(&state->removed);
    free(state);
    return 1;
}

// MARK: Workload 8: memory

typedef struct {
    struct event_base *base;
    struct event **events;
    int count;
} timer_set;

void *raw_timer_set_new(int count) {
    timer_set *set = calloc(1, sizeof *set);
    if (!set) return NULL;
    set->base = new_base(1);
    set->events = calloc((size_t)(count > 0 ? count : 1), sizeof *set->events);
    set->count = count;
    if (!set->base || !set->events) {
        if (set->base) event_base_free(set->base);
        free(set->events);
        free(set);
        return NULL;
    }
    return set;
}

void raw_timer_set_fill(void *opaque) {
    timer_set *set = opaque;
    for (int i = 0; i < set->count; i++) {
        set->events[i] = event_new(set->base, -1, 0, never_fires, NULL);
        struct timeval delay = {3600, (suseconds_t)((i * 7919) % 1000000)};
        event_add(set->events[i], &delay);
    }
}

void raw_timer_set_free(void *opaque) {
    timer_set *set = opaque;
    if (!set) return;
    for (int i = 0; i < set->count; i++) {
        if (set->events[i]) event_free(set->events[i]);
    }
    event_base_free(set->base);
    free(set->events);
    free(set);
}

typedef struct {
    raw_loop **loops;
    int count;
} loop_set;

void *raw_loops_start(int count) {
    loop_set *set = calloc(1, sizeof *set);
    if (!set) return NULL;
    set->loops = calloc((size_t)(count > 0 ? count : 1), sizeof *set->loops);
    if (!set->loops) {
        free(set);
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        set->loops[i] = raw_loop_start();
        if (!set->loops[i]) {
            set->count = i;
            raw_loops_stop(set);
            return NULL;
        }
    }
    set->count = count;
    return set;
}

void raw_loops_stop(void *opaque) {
    loop_set *set = opaque;
    if (!set) return;
    for (int i = 0; i < set->count; i++) raw_loop_stop(set->loops[i]);
    free(set->loops);
    free(set);
}

// MARK: Machine: a cache line's round trip between two processors

typedef struct {
    int cpu;
    int rounds;
    int player;  // 0 serves, 1 returns
    int *word;
    int *go;  // 0 wait, 1 start, 2 give up
    int pinned;
    double seconds;
} round_trip_args;

static void *round_trip_main(void *arg) {
    round_trip_args *args = arg;
    args->pinned = raw_pin_thread(args->cpu);
    int go;
    while ((go = __atomic_load_n(args->go, __ATOMIC_ACQUIRE)) == 0) sched_yield();
    if (go != 1) return NULL;
    double start = mono_now();
    for (int i = 0; i < args->rounds; i++) {
        if (args->player == 0) {
            __atomic_store_n(args->word, 1, __ATOMIC_RELEASE);
            while (__atomic_load_n(args->word, __ATOMIC_ACQUIRE) != 0) {}
        } else {
            while (__atomic_load_n(args->word, __ATOMIC_ACQUIRE) != 1) {}
            __atomic_store_n(args->word, 0, __ATOMIC_RELEASE);
        }
    }
    args->seconds = mono_now() - start;
    return NULL;
}

int raw_pin_thread(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

int raw_allowed_processor(int index) {
    cpu_set_t allowed;
    if (index < 0 || sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &allowed) && index-- == 0) return cpu;
    }
    return -1;
}

int raw_allowed_processors(void) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 0;
    return CPU_COUNT(&allowed);
}

double raw_core_round_trip_ns(int rounds) {
    int cpus[2] = {raw_allowed_processor(0), raw_allowed_processor(1)};
    if (rounds < 1 || cpus[1] < 0) return 0;
    // The word has a cache line of its own; the start flag is elsewhere.
    int *word = aligned_alloc(64, 64);
    if (!word) return 0;
    __atomic_store_n(word, 0, __ATOMIC_RELAXED);
    int go = 0;
    round_trip_args args[2];
    pthread_t threads[2];
    int started = 0;
    for (int i = 0; i < 2; i++) {
        args[i] = (round_trip_args){cpus[i], rounds, i, word, &go, 0, 0};
        if (pthread_create(&threads[started], NULL, round_trip_main, &args[i]) == 0) started++;
    }
    // Both threads or neither: a lone one would wait for its partner for ever.
    __atomic_store_n(&go, started == 2 ? 1 : 2, __ATOMIC_RELEASE);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    free(word);
    if (started < 2) return 0;
    if (!args[0].pinned || !args[1].pinned) return 0;
    return args[0].seconds * 1e9 / rounds;
}
