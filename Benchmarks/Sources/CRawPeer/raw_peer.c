// Clocks, latches, memory and processors for the benchmark's C peers (include/raw_peer.h).

#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "raw_peer.h"

double raw_mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void raw_latch_init(raw_latch *l) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&l->mutex, NULL);
    l->open = 0;
}

void raw_latch_destroy(raw_latch *l) {
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->mutex);
}

void raw_latch_open(raw_latch *l) {
    pthread_mutex_lock(&l->mutex);
    l->open = 1;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->mutex);
}

int raw_latch_wait(raw_latch *l, double timeout) {
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

raw_start_result raw_loop_thread_start(pthread_t *thread, void *(*main)(void *), void *arg, raw_latch *ready,
                                       const int *failed) {
    if (pthread_create(thread, NULL, main, arg) != 0) return raw_start_not_created;
    if (!raw_latch_wait(ready, 10.0)) {
        pthread_detach(*thread);  // leaked: never touched again
        return raw_start_timed_out;
    }
    if (*failed) {
        pthread_join(*thread, NULL);
        return raw_start_failed;
    }
    return raw_start_ok;
}

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

raw_timers_result raw_timers_outcome(int fired, int count, double start, double end, double first) {
    raw_timers_result result = {fired == count, fired, end - start, end - first};
    return result;
}

// MARK: Processors

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
    double start = raw_mono_now();
    for (int i = 0; i < args->rounds; i++) {
        if (args->player == 0) {
            __atomic_store_n(args->word, 1, __ATOMIC_RELEASE);
            while (__atomic_load_n(args->word, __ATOMIC_ACQUIRE) != 0) {}
        } else {
            while (__atomic_load_n(args->word, __ATOMIC_ACQUIRE) != 1) {}
            __atomic_store_n(args->word, 0, __ATOMIC_RELEASE);
        }
    }
    args->seconds = raw_mono_now() - start;
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
