// The workloads on any peer's loop that use its descriptor watchers and timers
// (include/raw_peer.h): descriptor ping-pong, idle wake-ups, and loops asleep for the memory
// figure.

#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "raw_peer.h"

// MARK: Descriptor ping-pong over a socketpair

typedef struct {
    const raw_peer *peer;
    int fds[2];
    void *loops[2];
    void *watchers[2];
    int round_trips;
    int completed;  // loop A only
    double end;
    raw_latch added[2], removed[2], done;
} fd_state;

static void fd_readable(void *context, int fd) {
    fd_state *state = context;
    char byte;
    if (read(fd, &byte, 1) != 1) return;
    if (fd == state->fds[1] || ++state->completed < state->round_trips) {
        ssize_t put = write(fd, &byte, 1);
        (void)put;
    } else {
        state->end = raw_mono_now();
        raw_latch_open(&state->done);
    }
}

/// The context of an item that adds or removes end `side`'s watcher on its own loop.
typedef struct {
    fd_state *state;
    int side;
} fd_end;

static int fd_add(void *context) {
    fd_end *end = context;
    fd_state *state = end->state;
    state->watchers[end->side] =
        state->peer->watch_fd(state->loops[end->side], state->fds[end->side], fd_readable, state);
    raw_latch_open(&state->added[end->side]);
    return 0;
}

static int fd_remove(void *context) {
    fd_end *end = context;
    end->state->peer->unwatch_fd(end->state->watchers[end->side]);
    raw_latch_open(&end->state->removed[end->side]);
    return 0;
}

raw_fd_result raw_peer_fd_pingpong(const raw_peer *peer, int round_trips, double timeout_seconds) {
    raw_fd_result result = {0, 0, 0};
    if (round_trips < 1) return result;
    fd_state *state = calloc(1, sizeof *state);  // leaked if a loop fails to stop
    if (!state) return result;
    state->peer = peer;
    state->round_trips = round_trips;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, state->fds) != 0) {
        free(state);
        return result;
    }
    fd_end ends[2] = {{state, 0}, {state, 1}};
    raw_latch_init(&state->done);
    int ok = 1;
    for (int side = 0; side < 2; side++) {
        raw_latch_init(&state->added[side]);
        raw_latch_init(&state->removed[side]);
        state->loops[side] = peer->loop.start();
        ok = ok && state->loops[side];
    }
    int added[2] = {0, 0};
    for (int side = 0; side < 2 && ok; side++) {
        peer->loop.post(state->loops[side], fd_add, &ends[side]);
        ok = added[side] = raw_latch_wait(&state->added[side], 5.0);
    }
    double start = raw_mono_now();
    if (ok) {
        char byte = 'x';
        ok = write(state->fds[0], &byte, 1) == 1;
    }
    if (ok) ok = raw_latch_wait(&state->done, timeout_seconds);
    // Off the poll set on each loop's own thread before the descriptors are closed.
    int stopped = 1;
    for (int side = 0; side < 2; side++) {
        if (!state->loops[side]) continue;
        if (added[side]) peer->loop.post(state->loops[side], fd_remove, &ends[side]);
        stopped &= peer->loop.stop(state->loops[side]);
    }
    if (!stopped) return result;
    close(state->fds[0]);
    close(state->fds[1]);
    result.ok = ok;
    result.seconds = state->end - start;
    result.round_trips = state->completed;
    for (int side = 0; side < 2; side++) {
        raw_latch_destroy(&state->added[side]);
        raw_latch_destroy(&state->removed[side]);
    }
    raw_latch_destroy(&state->done);
    free(state);
    return result;
}

// MARK: Idle wake-ups

typedef struct {
    const raw_peer *peer;
    void *loop;
    void *tick;
    int with_timer;
    raw_latch added;
} idle_state;

static int idle_add(void *context) {
    idle_state *state = context;
    state->tick = state->peer->tick_start(state->loop);
    raw_latch_open(&state->added);
    return 0;
}

static int idle_remove(void *context) {
    idle_state *state = context;
    state->peer->tick_stop(state->tick);
    return 0;
}

void *raw_peer_idle_start(const raw_peer *peer, int with_timer) {
    idle_state *state = calloc(1, sizeof *state);
    if (!state) return NULL;
    state->peer = peer;
    state->with_timer = with_timer;
    raw_latch_init(&state->added);
    state->loop = peer->loop.start();
    if (!state->loop) {
        free(state);
        return NULL;
    }
    if (with_timer) {
        peer->loop.post(state->loop, idle_add, state);
        if (!raw_latch_wait(&state->added, 5.0)) {
            peer->loop.stop(state->loop);
            return NULL;
        }
    }
    return state;
}

long long raw_peer_idle_wakeups(void *idle) {
    idle_state *state = idle;
    return state->peer->loop_passes(state->loop);
}

int raw_peer_idle_stop(void *idle) {
    idle_state *state = idle;
    if (state->with_timer) state->peer->loop.post(state->loop, idle_remove, state);
    if (!state->peer->loop.stop(state->loop)) return 0;
    raw_latch_destroy(&state->added);
    free(state);
    return 1;
}

// MARK: Loops asleep

typedef struct {
    const raw_loop_ops *ops;
    void **loops;
    int count;
} loop_set;

void *raw_peer_loops_start(const raw_peer *peer, int count) {
    loop_set *set = calloc(1, sizeof *set);
    if (!set) return NULL;
    set->ops = &peer->loop;
    set->loops = calloc((size_t)(count > 0 ? count : 1), sizeof *set->loops);
    if (!set->loops) {
        free(set);
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        set->loops[i] = set->ops->start();
        if (!set->loops[i]) {
            set->count = i;
            raw_peer_loops_stop(set);
            return NULL;
        }
    }
    set->count = count;
    return set;
}

void raw_peer_loops_stop(void *opaque) {
    loop_set *set = opaque;
    if (!set) return;
    for (int i = 0; i < set->count; i++) set->ops->stop(set->loops[i]);
    free(set->loops);
    free(set);
}
