// The workloads that need only a loop taking work from other threads, on any peer's loop
// (include/raw_peer.h): post throughput and ping-pong.

#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "raw_peer.h"

// MARK: Post throughput

typedef struct {
    long long refs;  // counted posts only: as a Swift object's header, beside the count
    long long target;
    long long count;  // loop thread only
    double end;
    raw_latch done;
} post_state;

static int post_item(void *context) {
    post_state *state = context;
    if (++state->count == state->target) {
        state->end = raw_mono_now();
        raw_latch_open(&state->done);
    }
    return 0;
}

void raw_typical_run(const raw_typical *values) {
    raw_tally *tally = values->tally;
    tally->sum += values->index * values->weight + values->producer;
    tally->count++;
    post_item(values->counter);
    if (values->counted) {
        raw_peer_release(&tally->refs);
        raw_peer_release(&((post_state *)values->counter)->refs);
    }
}

void raw_peer_retain(long long *refs) {
    long long old = __atomic_load_n(refs, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(refs, &old, old + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void raw_peer_release(long long *refs) {
    long long old = __atomic_load_n(refs, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(refs, &old, old - 1, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

typedef struct {
    const raw_loop_ops *ops;
    void *loop;
    post_state *state;
    raw_tally tally;  // written by the loop thread only
    long long blocks;
    long long producer;
    int typical;
    pthread_barrier_t *barrier;
    int cpu;
    int pinned;
    double started;
} producer_args;

static void *producer_main(void *arg) {
    producer_args *args = arg;
    args->pinned = args->cpu < 0 || raw_pin_thread(args->cpu);
    pthread_barrier_wait(args->barrier);
    args->started = raw_mono_now();
    const raw_loop_ops *ops = args->ops;
    if (args->typical) {
        for (long long i = 0; i < args->blocks; i++) {
            raw_typical values = {args->state, &args->tally, i, i & 7, args->producer, args->typical == 2};
            if (values.counted) {
                raw_peer_retain(&args->tally.refs);
                raw_peer_retain(&args->state->refs);
            }
            ops->post_typical(args->loop, &values);
        }
    } else {
        for (long long i = 0; i < args->blocks; i++) ops->post(args->loop, post_item, args->state);
    }
    return NULL;
}

typedef struct {
    int cpu;
    int pinned;
    raw_latch done;
} pin_request;

static int pin_item(void *context) {
    pin_request *request = context;
    request->pinned = raw_pin_thread(request->cpu);
    raw_latch_open(&request->done);
    return 0;
}

/// Pins the loop thread to `cpu` with an item; 1 on success. The request is on the heap: it is
/// leaked if the loop never runs the item.
static int pin_loop(const raw_loop_ops *ops, void *loop, int cpu) {
    pin_request *request = calloc(1, sizeof *request);
    if (!request) abort();
    request->cpu = cpu;
    raw_latch_init(&request->done);
    ops->post(loop, pin_item, request);
    int ran = raw_latch_wait(&request->done, 10.0);
    int pinned = ran && request->pinned;
    if (ran) {
        raw_latch_destroy(&request->done);
        free(request);
    }
    return pinned;
}

raw_post_result raw_peer_post_throughput(const raw_peer *peer, int producers, long long blocks, int typical,
                                         double timeout_seconds, int loop_cpu, int producer_cpu) {
    raw_post_result result = {0, 0, 0};
    if (producers < 1 || producers > 64 || blocks < producers) return result;
    const raw_loop_ops *ops = &peer->loop;
    // On the heap: if a loop thread fails to stop it may still use it, and it is then leaked.
    post_state *state = calloc(1, sizeof *state);
    producer_args *args = calloc((size_t)producers, sizeof *args);
    if (!state || !args) abort();
    state->target = blocks;
    raw_latch_init(&state->done);
    void *loop = ops->start();
    if (!loop || (loop_cpu >= 0 && !pin_loop(ops, loop, loop_cpu))) {
        if (!loop || ops->stop(loop)) {
            raw_latch_destroy(&state->done);
            free(state);
            free(args);
        }
        return result;
    }
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)producers + 1);
    pthread_t threads[64];
    for (int p = 0; p < producers; p++) {
        args[p].ops = ops;
        args[p].loop = loop;
        args[p].state = state;
        args[p].blocks = blocks / producers + (p == 0 ? blocks % producers : 0);
        args[p].producer = p;
        args[p].typical = typical;
        args[p].barrier = &barrier;
        args[p].cpu = producer_cpu;
        if (pthread_create(&threads[p], NULL, producer_main, &args[p]) != 0) abort();
    }
    pthread_barrier_wait(&barrier);
    int done = raw_latch_wait(&state->done, timeout_seconds);
    for (int p = 0; p < producers; p++) pthread_join(threads[p], NULL);
    // The clock starts when the first producer leaves the start line (on two cores the measuring
    // thread may not run again until the producers are done).
    double start = args[0].started;
    for (int p = 1; p < producers; p++) {
        if (args[p].started < start) start = args[p].started;
    }
    pthread_barrier_destroy(&barrier);
    // The stop item runs after every block, so `state` and the tallies outlive their last use.
    if (!ops->stop(loop)) return result;
    int pinned = 1;
    for (int p = 0; p < producers; p++) pinned = pinned && args[p].pinned;
    // Counted posts: every reference a producer added was dropped after its block ran.
    int balanced = state->refs == 0;
    for (int p = 0; p < producers; p++) balanced = balanced && args[p].tally.refs == 0;
    result.ok = done && pinned && balanced;
    result.seconds = state->end - start;
    result.count = state->count;
    raw_latch_destroy(&state->done);
    free(state);
    free(args);
    return result;
}

// MARK: Ping-pong

typedef struct {
    const raw_loop_ops *ops;
    void *a, *b;
    int round_trips;
    int completed;  // loop A only
    int cancelled;  // loop A only: set after a timeout so that no new round trip starts
    double start;   // loop A only
    double *rtt_us;
    raw_latch done, cancel_seen;
} pingpong_state;

static int pingpong_ping(void *context);

static int pingpong_back(void *context) {
    pingpong_state *state = context;
    if (state->cancelled) return 0;
    state->rtt_us[state->completed++] = (raw_mono_now() - state->start) * 1e6;
    if (state->completed < state->round_trips) {
        pingpong_ping(context);
    } else {
        raw_latch_open(&state->done);
    }
    return 0;
}

static int pingpong_pong(void *context) {
    pingpong_state *state = context;
    state->ops->post(state->a, pingpong_back, state);
    return 0;
}

static int pingpong_cancel(void *context) {
    pingpong_state *state = context;
    state->cancelled = 1;
    raw_latch_open(&state->cancel_seen);
    return 0;
}

static int pingpong_ping(void *context) {
    pingpong_state *state = context;
    state->start = raw_mono_now();
    state->ops->post(state->b, pingpong_pong, state);
    return 0;
}

raw_pingpong_result raw_peer_pingpong(const raw_peer *peer, int round_trips, double *rtt_us,
                                      double timeout_seconds) {
    raw_pingpong_result result = {0, 0};
    if (round_trips < 1) return result;
    pingpong_state *state = calloc(1, sizeof *state);  // leaked if a loop fails to stop
    if (!state) return result;
    const raw_loop_ops *ops = &peer->loop;
    state->ops = ops;
    state->round_trips = round_trips;
    state->rtt_us = rtt_us;
    raw_latch_init(&state->done);
    raw_latch_init(&state->cancel_seen);
    state->a = ops->start();
    state->b = ops->start();
    if (!state->a || !state->b) {
        if (state->a) ops->stop(state->a);
        if (state->b) ops->stop(state->b);
        return result;
    }
    ops->post(state->a, pingpong_ping, state);
    int done = raw_latch_wait(&state->done, timeout_seconds);
    // After a timeout a round trip may still be in flight: A stops starting new ones, then B (which
    // may still post back to A) stops before A.
    ops->post(state->a, pingpong_cancel, state);
    if (!raw_latch_wait(&state->cancel_seen, 10.0)) return result;
    int stopped = ops->stop(state->b);
    stopped &= ops->stop(state->a);
    if (!stopped) return result;
    result.ok = done;
    result.completed = done ? state->completed : 0;
    raw_latch_destroy(&state->done);
    raw_latch_destroy(&state->cancel_seen);
    free(state);
    return result;
}
