#ifndef RAW_LIBUV_LOOP_H
#define RAW_LIBUV_LOOP_H

// A libuv loop on its own thread, fed through a uv_async_t and a locked queue (raw_libuv_loop.c);
// shared by the workloads of raw_libuv.c.

#include <pthread.h>
#include <uv.h>

#include "raw_peer.h"

typedef struct uvl_item uvl_item;
struct uvl_item {
    uvl_item *next;
    raw_fn fn;
    void *context;
};

typedef struct {
    uv_loop_t uv;
    uv_async_t async;
    pthread_mutex_t mutex;  // guards head and tail
    uvl_item *head, *tail;
    int stop;               // loop thread only
    long long iterations;   // uv_run returns (atomic)
    pthread_t thread;
    raw_latch ready, exited;
    int failed;
} uvl_loop;

uvl_loop *uvl_start(void);
void uvl_post(uvl_loop *loop, raw_fn fn, void *context);
void uvl_post_typical(uvl_loop *loop, const raw_typical *values);
int uvl_stop(uvl_loop *loop);

/// Milliseconds from the loop's cached time `uv_now` to `due` (CLOCK_MONOTONIC seconds, the clock
/// libuv's time follows), rounded up so that a timer is never asked to fire early.
uint64_t uvl_delay_ms(uv_loop_t *loop, double due);

#endif
