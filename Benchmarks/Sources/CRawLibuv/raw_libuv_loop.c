// A libuv loop on its own thread that takes work from other threads: a uv_async_t and a
// mutex-protected queue of malloc'd items (raw_libuv_loop.h).

#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>

#include "raw_libuv_loop.h"

static void uvl_on_async(uv_async_t *async) {
    uvl_loop *loop = async->data;
    pthread_mutex_lock(&loop->mutex);
    uvl_item *item = loop->head;
    loop->head = loop->tail = NULL;
    pthread_mutex_unlock(&loop->mutex);
    while (item) {
        uvl_item *next = item->next;
        item->fn(item->context);
        free(item);
        item = next;
    }
}

/// Appends `item` to the queue and wakes the loop (uv_async_send does nothing while a wake-up is
/// already pending).
static void uvl_enqueue(uvl_loop *loop, uvl_item *item) {
    item->next = NULL;
    pthread_mutex_lock(&loop->mutex);
    if (loop->tail) {
        loop->tail->next = item;
    } else {
        loop->head = item;
    }
    loop->tail = item;
    pthread_mutex_unlock(&loop->mutex);
    uv_async_send(&loop->async);
}

void uvl_post(uvl_loop *loop, raw_fn fn, void *context) {
    uvl_item *item = malloc(sizeof *item);
    if (!item) abort();
    item->fn = fn;
    item->context = context;
    uvl_enqueue(loop, item);
}

/// One allocation: the queue item with the values after it.
typedef struct {
    uvl_item item;
    raw_typical values;
} uvl_typical_item;

static int uvl_typical_run(void *context) {
    raw_typical_run(context);
    return 0;
}

void uvl_post_typical(uvl_loop *loop, const raw_typical *values) {
    uvl_typical_item *item = malloc(sizeof *item);
    if (!item) abort();
    item->values = *values;
    item->item.fn = uvl_typical_run;
    item->item.context = &item->values;
    uvl_enqueue(loop, &item->item);
}

static void *uvl_main(void *arg) {
    uvl_loop *loop = arg;
    if (uv_loop_init(&loop->uv) != 0) {
        loop->failed = 1;
        raw_latch_open(&loop->ready);
        return NULL;
    }
    if (uv_async_init(&loop->uv, &loop->async, uvl_on_async) != 0) {
        uv_loop_close(&loop->uv);
        loop->failed = 1;
        raw_latch_open(&loop->ready);
        return NULL;
    }
    loop->async.data = loop;
    raw_latch_open(&loop->ready);
    while (!loop->stop) {
        uv_run(&loop->uv, UV_RUN_ONCE);
        __atomic_add_fetch(&loop->iterations, 1, __ATOMIC_RELAXED);
    }
    // Every other handle was closed by the items that used it; this runs the close callbacks.
    uv_close((uv_handle_t *)&loop->async, NULL);
    uv_run(&loop->uv, UV_RUN_DEFAULT);
    uv_loop_close(&loop->uv);
    raw_latch_open(&loop->exited);
    return NULL;
}

static void uvl_free(uvl_loop *loop) {
    pthread_mutex_destroy(&loop->mutex);
    raw_latch_destroy(&loop->ready);
    raw_latch_destroy(&loop->exited);
    free(loop);
}

uvl_loop *uvl_start(void) {
    uvl_loop *loop = calloc(1, sizeof *loop);
    if (!loop) return NULL;
    pthread_mutex_init(&loop->mutex, NULL);
    raw_latch_init(&loop->ready);
    raw_latch_init(&loop->exited);
    switch (raw_loop_thread_start(&loop->thread, uvl_main, loop, &loop->ready, &loop->failed)) {
    case raw_start_ok: return loop;
    case raw_start_timed_out: return NULL;
    default: uvl_free(loop); return NULL;
    }
}

static int uvl_stop_item(void *context) {
    uvl_loop *loop = context;
    loop->stop = 1;
    return 0;
}

int uvl_stop(uvl_loop *loop) {
    if (!loop) return 1;
    uvl_post(loop, uvl_stop_item, loop);
    if (!raw_latch_wait(&loop->exited, 10.0)) {
        pthread_detach(loop->thread);
        return 0;
    }
    pthread_join(loop->thread, NULL);
    uvl_free(loop);
    return 1;
}

uint64_t uvl_delay_ms(uv_loop_t *loop, double due) {
    double delay = ceil(due * 1e3 - (double)uv_now(loop));
    return delay > 0 ? (uint64_t)delay : 0;
}
