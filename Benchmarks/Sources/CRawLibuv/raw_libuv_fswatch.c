// The file-watch workload on libuv (raw_libuv_file_watch in include/raw_libuv.h), the way libuv's
// documentation uses uv_fs_event_t: one uv_fs_event_t on a directory, started with
// uv_fs_event_start, its callback called once per event with the child's name. The files are
// created while the loop does not run, so that the kernel has queued every event when uv_run
// starts: the figure is the cost of delivering them, not of making files.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "raw_libuv.h"

typedef struct {
    int seen;
    int files;
    uv_fs_event_t event;
    uv_timer_t timer;
    int timed_out;
} watch_run;

static void changed(uv_fs_event_t *event, const char *name, int events, int status) {
    (void)events;
    watch_run *run = event->data;
    if (status < 0 || name == NULL) return;
    if (++run->seen == run->files) uv_stop(event->loop);
}

static void timed_out(uv_timer_t *timer) {
    watch_run *run = timer->data;
    run->timed_out = 1;
    uv_stop(timer->loop);
}

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void close_handle(uv_handle_t *handle, void *unused) {
    (void)unused;
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

raw_sock_result raw_libuv_file_watch(const char *directory, int files, double timeout_seconds) {
    raw_sock_result result = {0};
    uv_loop_t loop;
    watch_run run = {.files = files};
    if (uv_loop_init(&loop) != 0) {
        result.failure = "uv_loop_init";
        return result;
    }
    run.event.data = &run;
    run.timer.data = &run;
    uv_fs_event_init(&loop, &run.event);
    uv_timer_init(&loop, &run.timer);
    int started = uv_fs_event_start(&run.event, changed, directory, 0);
    if (started != 0) {
        result.failure = "uv_fs_event_start";
        result.error = -started;
    } else {
        char path[4096];
        for (int index = 0; index < files; index++) {
            snprintf(path, sizeof path, "%s/%d", directory, index);
            int made = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
            if (made >= 0) close(made);
        }
        uv_timer_start(&run.timer, timed_out, (uint64_t)(timeout_seconds * 1000), 0);
        double start = now_seconds();
        uv_run(&loop, UV_RUN_DEFAULT);
        double end = now_seconds();
        result.count = run.seen;
        if (run.timed_out) {
            result.failure = "timed out";
        } else {
            result.ok = 1;
            result.seconds = end - start;
        }
    }
    uv_walk(&loop, close_handle, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return result;
}
