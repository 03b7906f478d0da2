// The timer, busy-loop and memory workloads on libevent 2.1 (include/raw_libevent.h).

#define _GNU_SOURCE
// System headers before event2/*.h (Debian's event-config.h defines _GNU_SOURCE).
#include <sys/types.h>
#include <sys/time.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "raw_libevent_workloads.h"

// MARK: Helpers

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

/// An hour away, jittered so that the heap is not fed in order.
static struct timeval hour_away(long long index) {
    struct timeval delay = {3600, (suseconds_t)((index * 7919) % 1000000)};
    return delay;
}

struct event_base *lev_new_base(int precise) {
    struct event_config *config = event_config_new();
    if (!config) return NULL;
    event_config_set_flag(config, EVENT_BASE_FLAG_NOLOCK);
    if (precise) event_config_set_flag(config, EVENT_BASE_FLAG_PRECISE_TIMER);
    struct event_base *base = event_base_new_with_config(config);
    event_config_free(config);
    return base;
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
    double now = raw_mono_now();
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

raw_timers_result lev_timers(int count, const double *offsets, double lead_seconds, double *lateness_us,
                             double timeout_seconds) {
    raw_timers_result result = {0, 0, 0, 0};
    if (count < 1) return result;
    struct event_base *base = lev_new_base(1);
    if (!base) return result;
    timer_context *timers = calloc((size_t)count, sizeof *timers);
    if (!timers) {
        event_base_free(base);
        return result;
    }
    timers_state state = {.base = base, .lateness_us = lateness_us, .count = count};
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
        struct event *event = event_new(base, -1, 0, timer_fired, &timers[i]);
        timers[i].event = event;
        struct timeval delay = timeval_from(timers[i].due - raw_mono_now());
        event_add(event, &delay);
    }
    double end = raw_mono_now();

    struct event *give_up = event_new(base, -1, 0, timers_give_up, base);
    struct timeval limit = timeval_from(first + last_offset + timeout_seconds - raw_mono_now());
    event_add(give_up, &limit);
    event_base_dispatch(base);
    event_free(give_up);
    for (int i = 0; i < count; i++) {
        if (timers[i].event) event_free(timers[i].event);
    }
    event_base_free(base);
    free(timers);

    return raw_timers_outcome(state.fired, count, start, end, first);
}

// MARK: Workload 4: timer churn

static void never_fires(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
}

raw_churn_result lev_timer_churn(long long timers, int window) {
    raw_churn_result result = {0, 0};
    if (timers < 1 || window < 1) return result;
    struct event_base *base = lev_new_base(1);
    if (!base) return result;
    struct event **ring = calloc((size_t)window, sizeof *ring);
    if (!ring) {
        event_base_free(base);
        return result;
    }
    double start = raw_mono_now();
    for (long long i = 0; i < timers; i++) {
        struct event *event = event_new(base, -1, 0, never_fires, NULL);
        struct timeval delay = hour_away(i);
        event_add(event, &delay);
        size_t slot = (size_t)(i % window);
        if (ring[slot]) event_free(ring[slot]);  // event_free deletes a pending event first
        ring[slot] = event;
    }
    for (int slot = 0; slot < window; slot++) {
        if (ring[slot]) event_free(ring[slot]);
    }
    double end = raw_mono_now();
    free(ring);
    event_base_free(base);
    result.ok = 1;
    result.seconds = end - start;
    return result;
}

// MARK: Items at scale

raw_churn_result lev_items_at_scale(int count, const int32_t *removal_order, int sources) {
    raw_churn_result result = {0, 0};
    // libevent has no custom event sources: an event activated by hand is never added to a base.
    if (count < 1 || sources) return result;
    struct event_base *base = lev_new_base(1);
    if (!base) return result;
    struct event **events = calloc((size_t)count, sizeof *events);
    if (!events) {
        event_base_free(base);
        return result;
    }
    // Allocated before the clock starts, freed after it stops.
    for (int i = 0; i < count; i++) events[i] = evtimer_new(base, never_fires, NULL);
    // Measured: event_add of every timer (an hour away, jittered as in the churn), then event_del
    // of each in the removal order.
    double start = raw_mono_now();
    for (int i = 0; i < count; i++) {
        struct timeval delay = hour_away(i);
        event_add(events[i], &delay);
    }
    for (int i = 0; i < count; i++) event_del(events[removal_order[i]]);
    double end = raw_mono_now();
    for (int i = 0; i < count; i++) event_free(events[i]);
    free(events);
    event_base_free(base);
    result.ok = 1;
    result.seconds = end - start;
    return result;
}

// MARK: Scheduled blocks: schedule and cancel

/// Fired blocks of the run in progress (runs are one at a time, on one thread).
static long long blocks_fired;

static void block_fired(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    blocks_fired++;
    event_free(arg);  // a one-shot block is released as it runs
}

raw_churn_result lev_schedule_cancel(long long blocks, int fire_half) {
    raw_churn_result result = {0, 0};
    if (blocks < 1) return result;
    struct event_base *base = lev_new_base(1);
    if (!base) return result;
    blocks_fired = 0;
    long long firing = 0;
    struct timeval later = {3600, 0};
    struct timeval now = {0, 0};
    double start = raw_mono_now();
    for (long long i = 0; i < blocks; i++) {
        struct event *event = event_new(base, -1, 0, block_fired, event_self_cbarg());
        event_add(event, fire_half ? &now : &later);
        if (fire_half && (i & 1)) {
            firing++;
        } else {
            event_free(event);  // deletes the pending event first
        }
    }
    while (blocks_fired < firing) {
        if (event_base_loop(base, EVLOOP_ONCE) != 0) break;
    }
    double end = raw_mono_now();
    result.ok = blocks_fired == firing;
    event_base_free(base);
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

raw_iteration_result lev_iteration(double seconds, int observers) {
    raw_iteration_result result = {0, 0, 0, 0};
    if (observers < 0 || observers > 16) return result;
    struct event_base *base = lev_new_base(0);
    if (!base) return result;
    // The same descriptor a cross-thread loop keeps registered: the poll is not of an empty set.
    int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct event *wake = event_new(base, wake_fd, EV_READ | EV_PERSIST, never_fires, NULL);
    event_add(wake, NULL);
    busy_state state = {.base = base};
    state.event = event_new(base, -1, 0, busy_perform, &state);
    event_active(state.event, EV_TIMEOUT, 1);
    observer_calls = 0;

    double start = raw_mono_now();
    double deadline = start + seconds;
    for (long long pass = 1;; pass++) {
        for (int o = 0; o < observers; o++) observer_table[o](1);  // before timers
        for (int o = 0; o < observers; o++) observer_table[o](2);  // before sources
        event_base_loop(base, EVLOOP_NONBLOCK);
        if ((pass & 255) == 0 && raw_mono_now() >= deadline) break;
    }
    double end = raw_mono_now();

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

// MARK: Workload 8: memory

typedef struct {
    struct event_base *base;
    struct event **events;
    int count;
} timer_set;

void *lev_timer_set_new(int count) {
    timer_set *set = calloc(1, sizeof *set);
    if (!set) return NULL;
    set->base = lev_new_base(1);
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

void lev_timer_set_fill(void *opaque) {
    timer_set *set = opaque;
    for (int i = 0; i < set->count; i++) {
        set->events[i] = event_new(set->base, -1, 0, never_fires, NULL);
        struct timeval delay = hour_away(i);
        event_add(set->events[i], &delay);
    }
}

void lev_timer_set_free(void *opaque) {
    timer_set *set = opaque;
    if (!set) return;
    for (int i = 0; i < set->count; i++) {
        if (set->events[i]) event_free(set->events[i]);
    }
    event_base_free(set->base);
    free(set->events);
    free(set);
}
