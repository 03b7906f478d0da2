// The server I/O workloads' driver and bookkeeping (include/raw_peer_sockets.h): the peers do the
// I/O on their own loops; this file starts the loops, listens, times the runs and tears down.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "raw_peer_sockets.h"

// MARK: Bookkeeping

int raw_sock_should_connect(raw_sock_run *run) {
    int connected = __atomic_load_n(&run->connected, __ATOMIC_RELAXED);
    if (run->started >= run->connections || run->started - connected >= run->window) return 0;
    run->started++;
    return 1;
}

/// Idle: the state to measure is reached once both sides have every connection.
static void sock_check_open(raw_sock_run *run) {
    if (run->kind == RAW_SOCK_IDLE && __atomic_load_n(&run->connected, __ATOMIC_ACQUIRE) == run->connections &&
        __atomic_load_n(&run->accepted, __ATOMIC_ACQUIRE) == run->connections) {
        raw_latch_open(&run->reached);
    }
}

int raw_sock_connected(raw_sock_run *run) {
    int last = __atomic_add_fetch(&run->connected, 1, __ATOMIC_ACQ_REL) == run->connections;
    if (last) run->start = raw_mono_now();
    sock_check_open(run);
    return last;
}

void raw_sock_accepted(raw_sock_run *run) {
    __atomic_add_fetch(&run->accepted, 1, __ATOMIC_ACQ_REL);
    sock_check_open(run);
}

void raw_sock_received(raw_sock_run *run, long long bytes) {
    run->received += bytes;
    if (run->received >= run->bulk_bytes && run->end == 0) {
        run->end = raw_mono_now();
        raw_latch_open(&run->reached);
    }
}

int raw_sock_bulk_next(raw_sock_run *run, long long queued) {
    if (run->sent >= run->bulk_bytes || queued >= run->high_watermark) return 0;
    run->sent += run->chunk;
    return 1;
}

int raw_sock_echo_reply(raw_sock_run *run, double sent_at, int *remaining) {
    double now = raw_mono_now();
    if (run->rtt_us && run->completed < run->round_trips) run->rtt_us[run->completed] = (now - sent_at) * 1e6;
    run->completed++;
    if (--*remaining > 0) return 1;
    if (++run->finished == run->connections) {
        run->end = now;
        raw_latch_open(&run->reached);
    }
    return 0;
}

// MARK: The driver

long long raw_raise_descriptor_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
        getrlimit(RLIMIT_NOFILE, &limit);
    }
    return (long long)limit.rlim_cur;
}

/// A non-blocking socket listening on 127.0.0.1 with an ephemeral port; its address to `address`.
static int sock_listen(struct sockaddr_in *address) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    memset(address, 0, sizeof *address);
    address->sin_family = AF_INET;
    address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof *address;
    if (bind(fd, (struct sockaddr *)address, length) != 0 || listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr *)address, &length) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

typedef struct {
    const raw_socket_ops *ops;
    raw_sock_run *run;
    void *loop;
    int listen_fd;
    void *handle;
    int closing;
    raw_latch done;
} sock_call;

static int sock_call_item(void *context) {
    sock_call *call = context;
    if (call->closing) {
        if (call->listen_fd >= 0) call->ops->unserve(call->handle);
        else call->ops->close_clients(call->handle);
    } else {
        call->handle = call->listen_fd >= 0 ? call->ops->serve(call->loop, call->listen_fd, call->run)
                                            : call->ops->open_clients(call->loop, call->run);
    }
    raw_latch_open(&call->done);
    return 0;
}

/// Runs the serve/open (or, `closing`, the unserve/close) of `call` on its loop; 0 on a timeout.
static int sock_call_run(const raw_peer *peer, sock_call *call, int closing) {
    call->closing = closing;
    raw_latch_init(&call->done);
    peer->loop.post(call->loop, sock_call_item, call);
    int ok = raw_latch_wait(&call->done, 10.0);
    raw_latch_destroy(&call->done);
    return ok;
}

/// Runs `run` on two loops of `peer` (server, clients); with `rss_delta`, the RSS growth from
/// before the clients open to the state reached. `ok` 0 on failure or timeout, `failure` saying
/// which step failed.
static raw_sock_result sock_drive(const raw_peer *peer, raw_sock_run *run, double timeout, long long *rss_delta) {
    raw_sock_result result = {0, 0, 0, 0, NULL, 0};
    if (!peer->sockets) {
        result.failure = "no socket workloads on this peer";
        return result;
    }
    raw_latch_init(&run->reached);
    int listen_fd = sock_listen(&run->address);
    if (listen_fd < 0) {
        result.error = errno;
        result.failure = "could not listen on 127.0.0.1";
    }
    void *server_loop = listen_fd >= 0 ? peer->loop.start() : NULL;
    void *client_loop = server_loop ? peer->loop.start() : NULL;
    if (listen_fd >= 0 && !client_loop) result.failure = "a loop thread did not start";
    if (client_loop) {
        sock_call server = {peer->sockets, run, server_loop, listen_fd, NULL, 0, {0}};
        sock_call clients = {peer->sockets, run, client_loop, -1, NULL, 0, {0}};
        if (sock_call_run(peer, &server, 0)) {
            raw_malloc_trim();
            long long before = raw_rss_bytes();
            int opened = sock_call_run(peer, &clients, 0);
            int reached = opened && raw_latch_wait(&run->reached, timeout);
            if (rss_delta) *rss_delta = raw_rss_bytes() - before;
            if (!opened) {
                result.failure = "the clients' loop did not run their set-up within 10 s";
            } else if (!reached) {
                result.failure = "the run did not reach its end within the timeout";
            }
            if (opened && !sock_call_run(peer, &clients, 1) && reached) {
                result.failure = "the clients' loop did not close them within 10 s";
                reached = 0;
            }
            if (!sock_call_run(peer, &server, 1) && reached) {
                result.failure = "the server's loop did not close it within 10 s";
                reached = 0;
            }
            result.ok = reached;
            result.seconds = run->end - run->start;
            result.count = run->kind == RAW_SOCK_BULK  ? run->received
                           : run->kind == RAW_SOCK_IDLE ? __atomic_load_n(&run->connected, __ATOMIC_ACQUIRE)
                                                        : run->completed;
        } else {
            result.failure = "the server's loop did not run its set-up within 10 s";
            close(listen_fd);
        }
    } else if (listen_fd >= 0) {
        close(listen_fd);
    }
    if (client_loop && !peer->loop.stop(client_loop) && result.ok) {
        result.failure = "the clients' loop did not stop within 10 s";
        result.ok = 0;
    }
    if (server_loop && !peer->loop.stop(server_loop) && result.ok) {
        result.failure = "the server's loop did not stop within 10 s";
        result.ok = 0;
    }
    raw_latch_destroy(&run->reached);
    return result;
}

raw_sock_result raw_peer_bulk(const raw_peer *peer, long long bytes, int chunk, double timeout_seconds) {
    raw_sock_run *run = calloc(1, sizeof *run);
    char *data = malloc((size_t)chunk);
    if (!run || !data) abort();
    memset(data, 'x', (size_t)chunk);
    run->kind = RAW_SOCK_BULK;
    run->connections = 1;
    run->window = 1;
    run->bulk_bytes = bytes;
    run->chunk = chunk;
    run->chunk_bytes = data;
    run->low_watermark = 64 * 1024;
    run->high_watermark = 256 * 1024;
    raw_sock_result result = sock_drive(peer, run, timeout_seconds, NULL);
    free(data);
    free(run);
    return result;
}

raw_sock_result raw_peer_echo(const raw_peer *peer, int connections, int round_trips, int message, double *rtt_us,
                              double timeout_seconds) {
    raw_sock_run *run = calloc(1, sizeof *run);
    if (!run || message > (int)sizeof run->message_bytes) abort();
    run->kind = RAW_SOCK_ECHO;
    run->connections = connections;
    run->window = connections;
    run->message = message;
    memset(run->message_bytes, 'm', (size_t)message);
    run->round_trips = round_trips;
    run->rtt_us = connections == 1 ? rtt_us : NULL;
    raw_sock_result result = sock_drive(peer, run, timeout_seconds, NULL);
    free(run);
    return result;
}

raw_sock_result raw_peer_idle_connections(const raw_peer *peer, int connections, double timeout_seconds) {
    raw_sock_result result = {0, 0, 0, 0, NULL, 0};
    if (raw_raise_descriptor_limit() < 2LL * connections + 64) {
        result.failure = "fewer descriptors allowed than the connections need";
        return result;
    }
    raw_sock_run *run = calloc(1, sizeof *run);
    if (!run) abort();
    run->kind = RAW_SOCK_IDLE;
    run->connections = connections;
    run->window = 128;
    long long delta = 0;
    result = sock_drive(peer, run, timeout_seconds, &delta);
    result.bytes_per_connection = (double)delta / connections;
    free(run);
    return result;
}
