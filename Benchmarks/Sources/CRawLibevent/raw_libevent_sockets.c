// The server I/O workloads on libevent (include/raw_peer_sockets.h of CRawPeer): connections are
// bufferevents, the listener an evconnlistener, all in libevent_core. Writes are up to 256 KiB at
// a time (`bufferevent_set_max_single_write`; libevent's default is 16 KiB), as RunLoopKit's, and
// the bulk sender refills its output buffer from the write callback, which its low watermark
// fires.
//
// The bulk receiver is the exception: a bufferevent cannot read more than 4 KiB at a time in
// libevent 2.1. `evbuffer_read` caps every read at EVBUFFER_MAX_READ (4096) whatever
// `bufferevent_set_max_single_read` says (`evbuffer_set_max_read` came in 2.2), asks the kernel
// how much is waiting first (an `ioctl(FIONREAD)` per read), and the bufferevent reads once per
// wake-up: three system calls per 4 KiB. A libevent user after throughput reads with a plain
// event instead, into the evbuffer's own space (`evbuffer_reserve_space`, `readv`,
// `evbuffer_commit_space`), 64 KiB at a time and up to four times per wake-up, as RunLoopKit does.

#define _GNU_SOURCE
// System headers before event2/*.h (Debian's event-config.h defines _GNU_SOURCE).
#include <sys/types.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "raw_libevent_workloads.h"
#include "raw_peer_sockets.h"

static void no_delay(evutil_socket_t fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// MARK: Server

/// The bulk receiver's connection: a plain event and the evbuffer it reads into.
typedef struct {
    raw_sock_run *run;
    struct event *event;
    struct evbuffer *input;
    evutil_socket_t fd;
} lev_bulk_reader;

typedef struct {
    raw_sock_run *run;
    struct event_base *base;
    struct evconnlistener *listener;
    struct bufferevent **accepted;
    int count;
    lev_bulk_reader *bulk;  ///< bulk: the one connection, read without a bufferevent
} lev_server;

#define BULK_READ (64 * 1024)
#define BULK_READS_PER_WAKEUP 4

/// Reads what the kernel has (64 KiB per `readv`, four at most), then drains it: the server's
/// handler, as RunLoopKit's bulk server consumes its input buffer.
static void bulk_readable(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    lev_bulk_reader *reader = arg;
    for (int i = 0; i < BULK_READS_PER_WAKEUP; i++) {
        struct evbuffer_iovec extents[2];
        int used = evbuffer_reserve_space(reader->input, BULK_READ, extents, 2);
        if (used <= 0) abort();
        // The space reserved may exceed what was asked for: read no more than that.
        size_t allowed = BULK_READ;
        struct iovec vectors[2];
        for (int k = 0; k < used; k++) {
            size_t length = extents[k].iov_len < allowed ? extents[k].iov_len : allowed;
            vectors[k].iov_base = extents[k].iov_base;
            vectors[k].iov_len = length;
            allowed -= length;
        }
        ssize_t count = readv(fd, vectors, used);
        size_t remaining = count > 0 ? (size_t)count : 0;
        for (int k = 0; k < used; k++) {
            extents[k].iov_len = vectors[k].iov_len < remaining ? vectors[k].iov_len : remaining;
            remaining -= extents[k].iov_len;
        }
        evbuffer_commit_space(reader->input, extents, used);
        if (count <= 0) {
            // End of stream or an error (EAGAIN: read everything): the client went away.
            if (count == 0 || (errno != EAGAIN && errno != EINTR)) event_del(reader->event);
            break;
        }
        if (count < BULK_READ) break;  // the kernel had no more
    }
    size_t length = evbuffer_get_length(reader->input);
    if (length == 0) return;
    evbuffer_drain(reader->input, length);
    raw_sock_received(reader->run, (long long)length);
}

static void server_read(struct bufferevent *bev, void *arg) {
    lev_server *server = arg;
    struct evbuffer *input = bufferevent_get_input(bev);
    if (server->run->kind == RAW_SOCK_ECHO) {
        bufferevent_write_buffer(bev, input);  // moves the bytes
        return;
    }
    evbuffer_drain(input, evbuffer_get_length(input));  // idle: nothing is sent
}

static void server_event(struct bufferevent *bev, short what, void *arg) {
    (void)arg;
    // The client went away: the connection is freed with the server.
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) bufferevent_disable(bev, EV_READ | EV_WRITE);
}

static void server_accept(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *address, int length,
                          void *arg) {
    (void)listener;
    (void)address;
    (void)length;
    lev_server *server = arg;
    if (server->count == server->run->connections) {
        evutil_closesocket(fd);
        return;
    }
    no_delay(fd);
    if (server->run->kind == RAW_SOCK_BULK) {
        lev_bulk_reader *reader = calloc(1, sizeof *reader);
        if (!reader) abort();
        reader->run = server->run;
        reader->fd = fd;
        reader->input = evbuffer_new();
        reader->event = event_new(server->base, fd, EV_READ | EV_PERSIST, bulk_readable, reader);
        if (!reader->input || !reader->event) abort();
        event_add(reader->event, NULL);
        server->bulk = reader;
        server->count++;
        raw_sock_accepted(server->run);
        return;
    }
    struct bufferevent *bev = bufferevent_socket_new(server->base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_set_max_single_write(bev, 256 * 1024);
    bufferevent_setcb(bev, server_read, NULL, server_event, server);
    bufferevent_enable(bev, EV_READ);
    server->accepted[server->count++] = bev;
    raw_sock_accepted(server->run);
}

static void *lev_serve(void *loop, int listen_fd, raw_sock_run *run) {
    lev_server *server = calloc(1, sizeof *server);
    if (!server) abort();
    server->run = run;
    server->base = lev_loop_base(loop);
    server->accepted = calloc((size_t)run->connections, sizeof *server->accepted);
    if (!server->accepted) abort();
    // Backlog 0: the socket is listening already (1024, as RunLoopKit's listener).
    server->listener = evconnlistener_new(server->base, server_accept, server, LEV_OPT_CLOSE_ON_FREE, 0, listen_fd);
    return server;
}

static void lev_unserve(void *opaque) {
    lev_server *server = opaque;
    if (server->listener) evconnlistener_free(server->listener);
    if (server->bulk) {
        event_free(server->bulk->event);
        evbuffer_free(server->bulk->input);
        evutil_closesocket(server->bulk->fd);
        free(server->bulk);
    } else {
        for (int i = 0; i < server->count; i++) bufferevent_free(server->accepted[i]);
    }
    free(server->accepted);
    free(server);
}

// MARK: Clients

typedef struct lev_clients lev_clients;

typedef struct {
    lev_clients *set;
    struct bufferevent *bev;
    int remaining;
    double sent_at;
} lev_client;

struct lev_clients {
    raw_sock_run *run;
    struct event_base *base;
    lev_client *clients;
    int count;
};

static void client_send(lev_client *client) {
    raw_sock_run *run = client->set->run;
    if (run->kind == RAW_SOCK_ECHO) {
        client->sent_at = raw_mono_now();
        bufferevent_write(client->bev, run->message_bytes, (size_t)run->message);
        return;
    }
    // The chunk is the same bytes every time and outlives the run: queued by reference, not
    // copied. `bufferevent_write` would copy each 64 KiB chunk into a fresh 128 KiB block
    // (libevent rounds blocks up to a power of two), which malloc gives back to the kernel when
    // it is freed (an madvise per chunk) and takes again, page faults included, for the next.
    struct evbuffer *output = bufferevent_get_output(client->bev);
    while (raw_sock_bulk_next(run, (long long)evbuffer_get_length(output))) {
        evbuffer_add_reference(output, run->chunk_bytes, (size_t)run->chunk, NULL, NULL);
    }
}

static void client_read(struct bufferevent *bev, void *arg) {
    lev_client *client = arg;
    raw_sock_run *run = client->set->run;
    struct evbuffer *input = bufferevent_get_input(bev);
    while (evbuffer_get_length(input) >= (size_t)run->message) {
        evbuffer_drain(input, (size_t)run->message);
        if (raw_sock_echo_reply(run, client->sent_at, &client->remaining)) client_send(client);
    }
}

/// Called once the output buffer has drained to the low watermark.
static void client_write(struct bufferevent *bev, void *arg) {
    (void)bev;
    lev_client *client = arg;
    if (client->set->run->kind == RAW_SOCK_BULK) client_send(client);
}

static void clients_start(lev_clients *set);

static void client_event(struct bufferevent *bev, short what, void *arg) {
    lev_client *client = arg;
    lev_clients *set = client->set;
    if (!(what & BEV_EVENT_CONNECTED)) {
        bufferevent_disable(bev, EV_READ | EV_WRITE);  // the run times out
        return;
    }
    no_delay(bufferevent_getfd(bev));
    int last = raw_sock_connected(set->run);
    if (set->run->kind == RAW_SOCK_IDLE) {
        clients_start(set);
    } else if (last) {
        for (int i = 0; i < set->count; i++) client_send(&set->clients[i]);
    }
}

static void clients_start(lev_clients *set) {
    raw_sock_run *run = set->run;
    while (raw_sock_should_connect(run)) {
        lev_client *client = &set->clients[set->count++];
        client->set = set;
        client->remaining = run->round_trips;
        client->bev = bufferevent_socket_new(set->base, -1, BEV_OPT_CLOSE_ON_FREE);
        bufferevent_set_max_single_write(client->bev, 256 * 1024);
        bufferevent_setcb(client->bev, client_read, client_write, client_event, client);
        if (run->kind == RAW_SOCK_BULK) bufferevent_setwatermark(client->bev, EV_WRITE, (size_t)run->low_watermark, 0);
        bufferevent_enable(client->bev, EV_READ);
        bufferevent_socket_connect(client->bev, (struct sockaddr *)&run->address, sizeof run->address);
    }
}

static void *lev_open_clients(void *loop, raw_sock_run *run) {
    lev_clients *set = calloc(1, sizeof *set);
    if (!set) abort();
    set->run = run;
    set->base = lev_loop_base(loop);
    set->clients = calloc((size_t)run->connections, sizeof *set->clients);
    if (!set->clients) abort();
    clients_start(set);
    return set;
}

static void lev_close_clients(void *opaque) {
    lev_clients *set = opaque;
    for (int i = 0; i < set->count; i++) bufferevent_free(set->clients[i].bev);
    free(set->clients);
    free(set);
}

const raw_socket_ops lev_socket_ops = {lev_serve, lev_unserve, lev_open_clients, lev_close_clients};
